#!/usr/bin/env python3
"""The regression gate (gemmbench.py compare): equal reports pass, a case more
than the tolerance slower or unhealthy fails, unusable input exits 2. Runs the
driver as a program on small reports written to a temporary folder."""

import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gemmbench_compare import CompareError, compare_reports  # noqa: E402

GEMMBENCH = os.path.join(HERE, "gemmbench.py")
BASELINE = os.path.join(HERE, "baselines", "h200", "e2e.json")


def e2e_case(name, jobs_per_s, p50_ms):
    """An e2e case as gemmbench run writes it, cut to what compare reads."""
    return {"name": name, "client": {"rc": 0}, "server_exit": 0,
            "report": {"requests_per_s": jobs_per_s, "latency_ms": {"p50": p50_ms, "p99": 2 * p50_ms},
                       "errors": 0, "verify_failures": 0, "server_counts_agree": True}}


def e2e_report(commit="aaaaaaaaaaaa"):
    return {"schema_version": 1, "scenario": "e2e", "commit": commit, "backend": "cuda",
            "date": "2026-12-01T00:00:00Z", "command": "gemmbench.py run --scenario e2e",
            "gpu": [{"name": "NVIDIA H200"}],
            "results": {"cases": [e2e_case("small", 1000.0, 2.0), e2e_case("large", 10.0, 80.0)]}}


class CompareTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.old = e2e_report()

    def write(self, name, report):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(report if isinstance(report, str) else json.dumps(report))
        return path

    def gate(self, new, *flags, old=None):
        """(exit code, stdout, stderr) of gemmbench.py compare OLD NEW."""
        old_path = old if isinstance(old, str) else self.write("old.json", old or self.old)
        new_path = new if isinstance(new, str) else self.write("new.json", new)
        proc = subprocess.run([sys.executable, GEMMBENCH, "compare", old_path, new_path, *flags],
                              capture_output=True, text=True)
        return proc.returncode, proc.stdout, proc.stderr

    def changed(self, change):
        """A copy of OLD with change(case "small") applied, as NEW."""
        new = copy.deepcopy(self.old)
        new["commit"] = "bbbbbbbbbbbb"
        change(new["results"]["cases"][0])
        return new

    def assert_fails(self, new, *reasons):
        rc, out, err = self.gate(new)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("gate: FAIL (1 of 2 cases)", out)
        for reason in reasons:
            self.assertIn(f"  small: {reason}", out)
        self.assertRegex(out, r"\nsmall .* WORSE\n")

    def test_equal_reports_pass(self):
        rc, out, _ = self.gate(self.old)
        self.assertEqual(rc, 0)
        self.assertTrue(out.rstrip().endswith("gate: pass"), out)
        self.assertRegex(out, r"\nsmall +1000\.0 +1000\.0 +\+0\.0% +2\.000 +2\.000 +\+0\.0% +ok\n")

    def test_11_percent_fewer_jobs_fails(self):
        self.assert_fails(self.changed(lambda c: c["report"].update(requests_per_s=890.0)),
                          "jobs/s -11.0% (more than 10% lower)")

    def test_11_percent_higher_p50_fails(self):
        self.assert_fails(self.changed(lambda c: c["report"]["latency_ms"].update(p50=2.22)),
                          "p50 +11.0% (more than 10% higher)")

    def test_9_percent_worse_passes(self):
        def worse(c):
            c["report"]["requests_per_s"] = 910.0
            c["report"]["latency_ms"]["p50"] = 2.18
        rc, out, _ = self.gate(self.changed(worse))
        self.assertEqual(rc, 0, out)
        self.assertIn("gate: pass", out)

    def test_several_runs_judge_each_case_by_its_best(self):
        slow = self.changed(lambda c: c["report"].update(requests_per_s=850.0))
        fast = self.changed(lambda c: c["report"].update(requests_per_s=990.0))
        slow_path, fast_path = self.write("slow.json", slow), self.write("fast.json", fast)
        old_path = self.write("old.json", self.old)
        proc = subprocess.run([sys.executable, GEMMBENCH, "compare", old_path, slow_path,
                               fast_path], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("each case judged by its best run on either side", proc.stdout)
        self.assertRegex(proc.stdout, r"\nsmall +1000\.0 +990\.0 ")
        # A run with errors fails the case even when another is clean.
        broken = self.changed(lambda c: c["report"].update(errors=3))
        proc = subprocess.run([sys.executable, GEMMBENCH, "compare", old_path, fast_path,
                               self.write("broken.json", broken)],
                              capture_output=True, text=True)
        self.assertEqual(proc.returncode, 1, proc.stdout)
        self.assertIn("small: 3 errors (run 2)", proc.stdout)

    def test_more_old_runs_hold_each_case_to_its_best(self):
        # OLD's other run was faster: NEW is held to that one.
        faster_old = self.changed(lambda c: c["report"].update(requests_per_s=1200.0))
        new = self.changed(lambda c: c["report"].update(requests_per_s=1050.0))
        old_path = self.write("old.json", self.old)
        proc = subprocess.run([sys.executable, GEMMBENCH, "compare", old_path,
                               self.write("new.json", new), "--old-runs",
                               self.write("old2.json", faster_old)],
                              capture_output=True, text=True)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn("small: jobs/s -12.5% (more than 10% lower)", proc.stdout)

    def test_exactly_the_tolerance_passes(self):
        rc, out, _ = self.gate(self.changed(lambda c: c["report"].update(requests_per_s=900.0)))
        self.assertEqual(rc, 0, out)

    def test_tolerance_flag(self):
        new = self.changed(lambda c: c["report"].update(requests_per_s=940.0))
        self.assertEqual(self.gate(new)[0], 0)
        self.assertEqual(self.gate(new, "--tolerance", "5")[0], 1)

    def test_faster_passes(self):
        def faster(c):
            c["report"]["requests_per_s"] = 2000.0
            c["report"]["latency_ms"]["p50"] = 1.0
        self.assertEqual(self.gate(self.changed(faster))[0], 0)

    def test_a_missing_case_fails(self):
        new = copy.deepcopy(self.old)
        del new["results"]["cases"][0]
        self.assert_fails(new, "missing from NEW")

    def test_a_case_only_in_new_is_named_not_gated(self):
        new = copy.deepcopy(self.old)
        new["results"]["cases"].append(e2e_case("extra", 1.0, 1.0))
        rc, out, _ = self.gate(new)
        self.assertEqual(rc, 0)
        self.assertIn("only in NEW, not compared: extra", out)

    def test_a_case_with_errors_fails(self):
        self.assert_fails(self.changed(lambda c: c["report"].update(errors=3)), "3 errors")

    def test_a_client_that_failed_fails(self):
        self.assert_fails(self.changed(lambda c: c["client"].update(rc=2)), "client rc 2")
        self.assert_fails(self.changed(lambda c: c.update(report=None)), "no report")

    def test_server_counts_that_disagree_fail(self):
        self.assert_fails(self.changed(lambda c: c["report"].update(server_counts_agree=False)),
                          "server counts disagree")

    def test_cases_flag_limits_the_gate(self):
        new = self.changed(lambda c: c["report"].update(requests_per_s=500.0))
        rc, out, _ = self.gate(new, "--cases", "large")
        self.assertEqual(rc, 0, out)
        self.assertNotIn("small", out)
        rc, _, err = self.gate(new, "--cases", "large,nope")
        self.assertEqual(rc, 2)
        self.assertIn("no case nope in OLD", err)

    def test_json_record(self):
        path = os.path.join(self.tmp.name, "record.json")
        rc, _, _ = self.gate(self.changed(lambda c: c["report"].update(requests_per_s=500.0)),
                             "--json", path)
        self.assertEqual(rc, 1)
        with open(path) as f:
            record = json.load(f)
        self.assertEqual(record["verdict"], "fail")
        self.assertEqual(record["tolerance_pct"], 10.0)
        self.assertEqual((record["failed"], record["compared"]), (1, 2))
        self.assertEqual(record["old"]["commit"], "aaaaaaaaaaaa")
        self.assertEqual(record["new"][0]["commit"], "bbbbbbbbbbbb")
        for key in ("date", "command", "scenario"):
            self.assertIn(key, record["new"][0])
        small = record["cases"][0]
        self.assertEqual((small["name"], small["verdict"]), ("small", "WORSE"))
        self.assertEqual(small["new"]["jobs_per_s"], 500.0)
        self.assertAlmostEqual(small["change_pct"]["jobs_per_s"], -50.0)
        self.assertNotIn("schema_version", record)  # `tables` must not take it for a report

    def test_a_folder_stands_for_its_e2e_json(self):
        folder = os.path.join(self.tmp.name, "out")
        os.mkdir(folder)
        self.write(os.path.join("out", "e2e.json"), self.old)
        rc, out, _ = self.gate(folder)
        self.assertEqual(rc, 0, out)
        self.assertIn(os.path.join(folder, "e2e.json"), out)

    def test_the_kept_baseline_against_itself_passes(self):
        rc, out, err = self.gate(BASELINE, old=BASELINE)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("gate: pass", out)
        self.assertEqual(out.count(" ok\n"), 11)
        folder = os.path.dirname(BASELINE)  # the folder holds other scenarios too
        self.assertEqual(self.gate(folder, old=BASELINE)[0], 0)

    def test_batching_shaped_reports(self):
        def batching_case(name, rate, p50):
            return {"name": name, "rc": 0, "server_exit": 0,
                    "report": {"requests_per_s": rate, "latency_ms": {"p50": p50}, "errors": 0}}
        old = {"scenario": "batching", "results": {"cases": [
            batching_case("on", 100.0, 4.0), {"name": "single", "rc": 0, "report": {"runs": []}}]}}
        new = copy.deepcopy(old)
        self.assertEqual(self.gate(new, old=old)[0], 0)
        new["results"]["cases"][0]["rc"] = 1
        self.assertEqual(self.gate(new, old=old)[0], 1)

    def test_unusable_input_exits_2(self):
        rc, _, err = self.gate(os.path.join(self.tmp.name, "absent.json"))
        self.assertEqual(rc, 2)
        self.assertIn("cannot read", err)
        self.assertEqual(self.gate(self.write("bad.json", "{not json"))[0], 2)
        rc, _, err = self.gate({"scenario": "soak", "results": {"verdict": "pass"}})
        self.assertEqual(rc, 2)
        self.assertIn("no results.cases", err)
        self.assertEqual(self.gate({"scenario": "e2e", "results": {"cases": []}})[0], 2)
        regions = copy.deepcopy(self.old)
        regions["scenario"] = "regions"
        rc, _, err = self.gate(regions)
        self.assertEqual(rc, 2)
        self.assertIn("different scenarios", err)
        tcp = {"scenario": "tcp", "results": {"cases": [{"name": "tcp1", "rc": 0, "report": {}}]}}
        self.assertEqual(self.gate(tcp, old=tcp)[0], 2)

    def test_compare_reports_is_pure(self):
        new = self.changed(lambda c: c["report"].update(requests_per_s=500.0))
        result = compare_reports(self.old, new, tolerance_pct=60)
        self.assertEqual(result["verdict"], "pass")
        self.assertEqual([e["verdict"] for e in result["cases"]], ["ok", "ok"])
        with self.assertRaises(CompareError):
            compare_reports(self.old, dict(new, scenario="batching"))


if __name__ == "__main__":
    unittest.main()
