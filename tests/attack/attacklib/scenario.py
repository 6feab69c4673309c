"""One scenario of `attack.py run`: a fresh server, its idle figures, the
victim's load, the attacks for hold_s, the settle time, and issue 12's
targets on what was measured.
"""

import asyncio
import json
import os
import time

from .config import attack_params, mib
from .context import AttackContext, raw_info
from .procfs import (Sampler, count_fds, cpu_between, read_proc_status,
                     rss_by_mapping, thread_cpu)
from .registry import run_attack
from .server import ServerProcess, child_priority


async def probe_client(client, port, timeout=10.0):
    """A fresh connection + Info from [::1] by gemm-client info."""
    start = time.monotonic()
    try:
        proc = await asyncio.create_subprocess_exec(
            client, "info", "-s", "[::1]:%d" % port, "--timeout-s",
            str(timeout / 2), stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, preexec_fn=child_priority)
    except OSError as e:
        return {"ok": False, "error": str(e)}
    try:
        _, err = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        return {"ok": False, "error": "no answer in %s s" % timeout,
                "seconds": round(time.monotonic() - start, 3)}
    out = {"ok": proc.returncode == 0,
           "seconds": round(time.monotonic() - start, 3)}
    if proc.returncode:
        out["error"] = err.decode("utf-8", "replace").strip()[-300:]
    return out


async def probes(client, port):
    """gemm-client info from [::1] (the target), and this module's own Info
    from 127.0.0.1, the attackers' address (for information)."""
    fresh, raw = await asyncio.gather(probe_client(client, port),
                                      raw_info("127.0.0.1", port, 5.0))
    raw.pop("info", None)
    return {"info_from_ipv6": fresh, "info_from_attacker_address": raw}


async def run_victim(client, port, cfg, duration_s, json_path):
    argv = [client, "load", "-s", "[::1]:%d" % port,
            "--shapes", cfg.victim_shapes, "-r", str(cfg.victim_rate),
            "-c", str(cfg.victim_concurrency), "--duration-s", str(duration_s),
            "--warmup-s", str(cfg.victim_warmup_s), "--verify-every", "1",
            "--job-timeout-ms", "5000", "--unary-share",
            str(cfg.victim_unary_share), "-q", "--json", json_path]
    argv += cfg.victim_arg
    start = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, preexec_fn=child_priority)
    limit = cfg.victim_warmup_s + duration_s + 120
    try:
        _, err = await asyncio.wait_for(proc.communicate(), limit)
        hung = False
    except asyncio.TimeoutError:
        proc.kill()
        _, err = await proc.communicate()
        hung = True
    out = {"argv": argv[1:], "exit_code": proc.returncode, "hung": hung,
           "seconds": round(time.monotonic() - start, 3)}
    try:
        with open(json_path) as f:
            report = json.load(f)
    except (OSError, ValueError):
        out["error"] = err.decode("utf-8", "replace").strip()[-500:] or \
            "no JSON report"
        return out
    sent = report.get("sent", 0)
    ok = report.get("answered_ok", 0)
    failed = report.get("answered_errors", 0)
    out.update({
        "sent": sent, "ok": ok, "failed": failed,
        "unanswered": sent - ok - failed,
        "verified": report.get("verified", 0),
        "verify_failures": report.get("verify_failures", 0),
        "errors_by_code": report.get("errors_by_code", {}),
        "error_sample": report.get("error_sample", {}),
        "latency_ms": {k: report.get("latency_ms", {}).get(k)
                       for k in ("p50", "p90", "p99", "p999", "max")},
        "requests_per_s": report.get("requests_per_s"),
        "stream_restarts": report.get("stream_restarts", 0),
        "server_counts_agree": report.get("server_counts_agree"),
        "timeline_p99_ms": [s.get("p99_ms") for s in
                            report.get("timeline", [])],
    })
    return out


async def run_scenario(name, attacks, cfg, overrides, baseline):
    """A fresh server; idle; victim; attacks for hold_s; settle; figures."""
    nofile = None
    if "fd-flood" in attacks:
        nofile = attack_params("fd-flood", cfg.scale,
                               overrides)["server_nofile"] or None
    server = ServerProcess(cfg.server, cfg.server_flags, cfg.workdir, name,
                           nofile)
    port = server.start()
    sampler = Sampler(server.proc.pid)
    sampler.start()
    t0 = time.monotonic()
    info = None
    for _ in range(50):
        got = await raw_info("127.0.0.1", port, 2.0)
        if got["ok"]:
            info = got["info"]
            break
        await asyncio.sleep(0.2)
    if info is None:
        raise RuntimeError("%s: the server never answered Info: %s" %
                           (name, server.log_tail()))
    await asyncio.sleep(cfg.idle_s)
    idle = [s[1] for s in sampler.window(time.monotonic() - cfg.idle_s)]
    idle_rss = sorted(idle)[len(idle) // 2] if idle else sampler.last_rss()
    idle_mappings = rss_by_mapping(server.proc.pid)
    idle_fds = next((s[3] for s in reversed(sampler.window(t0))
                     if s[3] is not None), None)
    log_idle = server.log_bytes()

    victim_s = cfg.lead_s + cfg.hold_s + 1.0
    victim_task = asyncio.ensure_future(run_victim(
        cfg.client, port, cfg, victim_s,
        os.path.join(cfg.workdir, name + ".victim.json")))
    await asyncio.sleep(cfg.victim_warmup_s + cfg.lead_s)

    stop = asyncio.Event()
    t_attack = time.monotonic()
    cpu_attack = thread_cpu(server.proc.pid)
    log_attack = server.log_bytes()
    contexts = {a: AttackContext("127.0.0.1", port, info,
                                 attack_params(a, cfg.scale, overrides), stop,
                                 cfg.rss_bound) for a in attacks}
    tasks = {a: asyncio.ensure_future(run_attack(a, contexts[a]))
             for a in attacks}

    async def probe_later():
        await asyncio.sleep(cfg.hold_s / 2)
        found = await probes(cfg.client, port)
        found["server_metrics"] = await asyncio.get_running_loop(
        ).run_in_executor(None, server.gauges)
        if cfg.dump_stacks:
            path = os.path.join(cfg.workdir, name + ".stacks.txt")
            error = await asyncio.get_running_loop().run_in_executor(
                None, server.dump_stacks, path)
            found["stacks"] = error or path
        return found
    during_task = asyncio.ensure_future(probe_later())
    safety_abort = None
    crashed_during = False
    while time.monotonic() - t_attack < cfg.hold_s:
        await asyncio.sleep(0.1)
        rss = sampler.last_rss() or 0
        if cfg.rss_safety_bytes and rss > cfg.rss_safety_bytes:
            safety_abort = ("server RSS %d MiB over the safety cap %d MiB: "
                            "attack stopped early" %
                            (mib(rss), mib(cfg.rss_safety_bytes)))
            break
        if not server.alive():
            crashed_during = True
            break
        if attacks and all(t.done() for t in tasks.values()):
            break  # every attack gave up early (an error, say)
    t_release = time.monotonic()
    cpu_release = thread_cpu(server.proc.pid)
    stop.set()
    results = {}
    for a, task in tasks.items():
        try:
            results[a] = await asyncio.wait_for(task, 60)
        except asyncio.TimeoutError:
            results[a] = {"error": "did not let go within 60 s of release"}
    t_released = time.monotonic()
    log_release = server.log_bytes()
    probe_during = await during_task
    await asyncio.sleep(cfg.settle_s)
    rss_after = sampler.last_rss()
    after_mappings = rss_by_mapping(server.proc.pid)
    probe_after = await probes(cfg.client, port) if server.alive() else {
        "info_from_ipv6": {"ok": False, "error": "server not running"}}
    victim = await victim_task
    # Once the victim is done: a server that still refuses is wedged.
    probe_final = await probes(cfg.client, port) if server.alive() else {
        "info_from_ipv6": {"ok": False, "error": "server not running"}}
    probe_final["seconds_after_release"] = round(time.monotonic() -
                                                 t_released, 1)
    log_after = server.log_bytes()
    status = read_proc_status(server.proc.pid)
    alive = server.alive()
    fds_after = count_fds(server.proc.pid)
    sampler.stop()
    exit_code, how = server.stop()
    window = sampler.window(t_attack, t_released)
    whole = sampler.window(t0)
    peak = max((s[1] for s in whole), default=None)
    out = {
        "scenario": name, "attacks": attacks,
        "server": {
            "argv": server.argv[1:], "port": port, "nofile_limit": nofile,
            "info": info,
            "idle_rss_mib": mib(idle_rss),
            "peak_rss_mib": mib(peak),
            "peak_rss_during_attack_mib": mib(max((s[1] for s in window),
                                                  default=None)),
            "vm_hwm_mib": mib(status.get("VmHWM")),
            "rss_at_release_mib": mib(window[-1][1] if window else None),
            "rss_after_mib": mib(rss_after),
            "settle_s": cfg.settle_s,
            # Resident MiB by mapping at idle and after the settle time.
            "rss_by_mapping_idle_mib": idle_mappings,
            "rss_by_mapping_after_mib": after_mappings,
            "threads_peak": max((s[2] or 0 for s in whole), default=None),
            # Server CPU during the attack, by thread name (gRPC's, the
            # scheduler's workers'): what a stalled victim waited on.
            "cpu_during_attack": dict(
                cpu_between(cpu_attack, cpu_release),
                seconds=round(t_release - t_attack, 2)),
            "fds_idle": idle_fds,
            "fds_peak": max((s[3] or 0 for s in whole), default=None),
            "fds_after": fds_after,
            "alive_at_end": alive,
            "crashed": not alive,
            "crashed_during_attack": crashed_during,
            "exit_code": exit_code, "stopped_by": how,
            "log_bytes_idle": log_idle,
            "log_bytes_attack": log_release - log_attack,
            "log_bytes_after_attack": log_after - log_release,
            "log_bytes_total": server.log_bytes(),
            "log_top_lines": server.log_line_kinds(log_attack),
            "log_tail": server.log_tail(3) if not alive else [],
            "rss_series_mib": [[round(s[0] - t0, 1), mib(s[1])]
                               for s in whole[::5]],
            "timeline_s": {"attack_start": round(t_attack - t0, 2),
                           "release": round(t_release - t0, 2),
                           "released": round(t_released - t0, 2)},
        },
        "attack": results,
        "probe_during": probe_during,
        "probe_after": probe_after,
        "probe_final": probe_final,
        "victim": victim,
    }
    if safety_abort:
        out["safety_abort"] = safety_abort
    out["targets"] = targets_of(out, cfg, baseline)
    return out


def targets_of(s, cfg, baseline):
    """Issue 12's targets for one scenario: {name: {value, bound, pass}}."""
    if not s["attacks"]:
        return {}
    srv, victim = s["server"], s["victim"]
    t = {}
    peak = max(x for x in (srv["peak_rss_mib"], srv["vm_hwm_mib"])
               if x is not None)
    t["rss_peak_within_bound"] = {"value_mib": peak,
                                  "bound_mib": mib(cfg.rss_bound),
                                  "pass": peak <= mib(cfg.rss_bound)}
    after, idle = srv["rss_after_mib"], srv["idle_rss_mib"]
    bound = round(idle + cfg.rss_return_mib, 1) if idle is not None else None
    t["rss_returns_to_idle"] = {
        "value_mib": after, "bound_mib": bound,
        "pass": after is not None and bound is not None and after <= bound}
    t["server_survives"] = {"value": not srv["crashed"],
                            "pass": not srv["crashed"]}
    for when in ("during", "after"):
        p = s["probe_" + when].get("info_from_ipv6", {})
        t["accepts_connections_" + when] = {"value": p.get("ok", False),
                                            "pass": p.get("ok", False)}
    lost = None
    if "sent" in victim:
        lost = (victim["failed"] + victim["unanswered"] +
                victim["verify_failures"])
    t["victim_loses_no_job"] = {
        "value": lost if lost is not None else "no report",
        "pass": lost == 0 and not victim.get("hung")}
    p99 = victim.get("latency_ms", {}).get("p99")
    base = baseline.get("victim", {}).get("latency_ms", {}).get("p99") \
        if baseline else None
    bound = base * cfg.p99_factor if base else None
    t["victim_p99_within_%gx" % cfg.p99_factor] = {
        "value_ms": p99, "bound_ms": bound,
        "pass": bool(p99 and bound and p99 <= bound)}
    # bad-utf8 alone: with other attacks the log holds their lines too, and
    # bad-utf8 may get few requests in (the client's connection cap, or the
    # client shut out), so bytes per bad request says nothing there.
    if s["attacks"] == ["bad-utf8"]:
        sent = s["attack"]["bad-utf8"].get("requests_sent", 0)
        per = srv["log_bytes_attack"] / sent if sent else None
        t["log_bytes_per_bad_request"] = {
            "value": None if per is None else round(per, 3),
            "bound": cfg.log_bytes_per_request,
            "pass": per is not None and per <= cfg.log_bytes_per_request}
    return t
