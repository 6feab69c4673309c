#!/usr/bin/env python3
"""The soak's verdict (gemmbench_soak.soak_checks): a healthy run passes, and
each check fails, named, on the results that should trip it."""

import copy
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gemmbench_soak import second_half_growth, soak_checks  # noqa: E402


def healthy():
    """The results of a soak that passes: 1,000 jobs, all OK and verified."""
    return {
        "client_rc": 0, "server_exit": 0,
        "report": {"sent": 1000, "answered_ok": 1000, "answered_errors": 0,
                   "server_side_jobs": 1000, "server_jobs_ok": 1000,
                   "server_jobs_failed": 0, "server_jobs_rejected": 0,
                   "verified": 1000, "verify_failures": 0, "errors_by_code": {}},
        "rss_peak_mb": 300.0, "rss_growth_second_half_mb": 4.0,
        "bounds": {"rss_max_mb": 8192, "rss_growth_max_mb": 256},
    }


class SoakChecksTest(unittest.TestCase):

    def verdict(self, change):
        results = healthy()
        change(results)
        return soak_checks(results)

    def assert_fails(self, change, *names):
        out = self.verdict(change)
        self.assertEqual(out["verdict"], "fail")
        self.assertEqual(out["failed_checks"], list(names))

    def test_a_healthy_run_passes(self):
        out = soak_checks(healthy())
        self.assertEqual(out["verdict"], "pass")
        self.assertEqual(out["failed_checks"], [])
        self.assertEqual(out["verified_fraction"], 1.0)
        self.assertTrue(out["server_counts_agree"])
        self.assertEqual([c["name"] for c in out["checks"]],
                         ["ran", "results", "lost", "errors", "server_counts",
                          "rss_max", "rss_growth"])

    def test_a_wrong_result(self):
        def wrong(r):
            r["client_rc"] = 2  # gemm-client load's exit code then
            r["report"]["verify_failures"] = 1
        self.assert_fails(wrong, "results")

    def test_nothing_verified(self):
        self.assert_fails(lambda r: r["report"].update(verified=0), "results")

    def test_a_lost_job(self):
        def lost(r):
            r["report"]["answered_ok"] = r["report"]["server_jobs_ok"] = 999
        out = self.verdict(lost)
        self.assertEqual(out["failed_checks"], ["lost"])
        self.assertEqual(out["lost"], 1)

    def test_a_failed_job(self):
        def failed(r):
            r["report"].update(answered_ok=999, answered_errors=1, server_jobs_ok=999,
                               server_jobs_rejected=1, errors_by_code={"UNAVAILABLE": 1})
        self.assert_fails(failed, "errors")

    def test_server_counts_that_disagree(self):
        self.assert_fails(lambda r: r["report"].update(server_jobs_ok=1001), "server_counts")
        self.assert_fails(lambda r: r["report"].update(server_jobs_ok=999, server_jobs_failed=1),
                          "server_counts")

    def test_no_server_counts(self):
        def none(r):
            for key in ("server_jobs_ok", "server_jobs_failed", "server_jobs_rejected"):
                del r["report"][key]
        self.assert_fails(none, "server_counts")

    def test_split_jobs_compare_the_servers_total(self):
        def split(r):
            r["report"].update(server_side_jobs=4000, server_jobs_ok=4000)
        self.assertEqual(self.verdict(split)["verdict"], "pass")

    def test_rss_past_the_ceiling(self):
        self.assert_fails(lambda r: r.update(rss_peak_mb=9000.0), "rss_max")

    def test_rss_growing_in_the_second_half(self):
        self.assert_fails(lambda r: r.update(rss_growth_second_half_mb=300.0), "rss_growth")

    def test_a_client_that_wrote_no_report(self):
        self.assert_fails(lambda r: r.update(client_rc=-9, report=None),
                          "ran", "results", "lost", "server_counts")

    def test_a_server_that_did_not_stop_cleanly(self):
        self.assert_fails(lambda r: r.update(server_exit=1), "ran")

    def test_second_half_growth(self):
        samples = [[0, 100.0], [1, 200.0], [2, 250.0], [3, 260.0], [4, 275.0]]
        self.assertEqual(second_half_growth(samples), 25.0)  # from t=2 to t=4
        self.assertEqual(second_half_growth([[0, 100.0]]), 0.0)
        leak = [[t, 100.0 + t] for t in range(600)]
        self.assertEqual(second_half_growth(leak), 299.0)


if __name__ == "__main__":
    unittest.main()
