"""What attack.py runs and how big: the attacks' names (in the order `all`
runs them), their parameters at each scale, and the driver's settings.
"""

MiB = 1 << 20
GiB = 1 << 30
GEMM_PATH = "/gemm.v1.GemmService/Gemm"
STREAM_PATH = "/gemm.v1.GemmService/GemmStream"
INFO_PATH = "/gemm.v1.GemmService/Info"
ZEROS = bytes(MiB)

ATTACKS = ["budget-fill", "partial-unary", "big-unary-unread", "open-jobs",
           "unread-results", "k0", "fd-flood", "rapid-reset", "continuation",
           "idle-conns", "bad-utf8"]

# Every attack parameter: (ci value, full value, what it means). 0 for a
# size means "derived from the server's limits" (Info), as described.
PARAMS = {
    "budget-fill": {
        "jobs": (0, 0, "jobs the budget is split into (0: as few as "
                 "max-job-bytes allows)"),
        "extra_jobs": (2, 2, "jobs declared beyond those that fit (these "
                       "wait)"),
        "refill": (True, True, "declare a new job whenever one ends (the "
                   "stall timeout expires them)"),
    },
    "partial-unary": {
        "count": (0, 0, "calls (0: enough to exceed rss_bound by overshoot)"),
        "overshoot": (1.25, 1.25, "with count 0: calls x sent bytes = "
                      "overshoot x rss_bound"),
        "announce_bytes": (0, 0, "announced message length (0: "
                           "max_message_bytes, 64 MiB)"),
        "send_fraction": (0.9375, 0.9375, "share of it sent (60 of 64 MiB)"),
        "connections": (8, 16, "connections the calls are spread over"),
        "parallel": (False, False, "send a connection's calls at once "
                     "(false: one after another)"),
        "path": (GEMM_PATH, GEMM_PATH, "the unary method called"),
    },
    "big-unary-unread": {
        "dim": (1024, 2048, "M = N = K of each job"),
        "with_c": (True, True, "send C too (beta 1): A+B+C bytes per call"),
        "count": (0, 0, "calls (0: enough to hold the budget, plus extra)"),
        "extra": (2, 2, "with count 0: calls beyond the budget"),
        "window": (1024, 1024, "HTTP/2 initial window advertised (bytes)"),
        "connections": (4, 8, "connections the calls are spread over"),
    },
    "open-jobs": {
        "count": (100000, 2000000, "1x1x1 jobs opened (params only)"),
        "batch": (1000, 4000, "messages per write"),
    },
    "unread-results": {
        "count": (100000, 1000000, "1x1x1 whole jobs sent"),
        "batch": (1000, 4000, "messages per write"),
        "window": (1024, 1024, "HTTP/2 initial window advertised (bytes)"),
        "inline": (False, False, "ask for results inline in JobEnd"),
    },
    "k0": {
        "dim": (0, 23170, "M = N (0: the largest C the budget and "
                "max-job-bytes allow)"),
        "count": (4, 4, "stream jobs (pipelined on one stream)"),
        "unary": (2, 2, "unary Gemm calls of the same job"),
        "read": (True, True, "read the results (false: tiny window, unread)"),
    },
    "fd-flood": {
        "count": (400, 400, "plain TCP connections held"),
        "server_nofile": (256, 256, "RLIMIT_NOFILE the driver starts the "
                          "server under in scenarios with fd-flood (0: none)"),
    },
    "rapid-reset": {
        "connections": (2, 2, "connections"),
        "batch": (100, 100, "HEADERS+RST_STREAM pairs per write"),
        "max_streams": (40000, 0, "stop after this many resets in all (0: "
                        "until released); CI keeps the server's backlog, "
                        "and so its memory, in bounds"),
        "paths": ("gemm", "gemm", "the calls reset: gemm (Gemm and "
                  "GemmStream in turn), or methods' full names joined by "
                  "'+' (/gemm.v1.GemmService/Info+/grpc.health.v1.Health/"
                  "Check)"),
    },
    "continuation": {
        "frames": (16384, 131072, "CONTINUATION frames in all (over "
                   "reconnections)"),
        "mode": ("value", "value", "value: one literal header whose huge "
                 "value spans the frames; fields: each frame holds complete "
                 "small header fields; empty: empty frames"),
    },
    "idle-conns": {
        "count": (500, 5000, "connections"),
    },
    "bad-utf8": {
        "count": (20000, 200000, "Gemm calls"),
        "connections": (2, 2, "connections"),
        "inflight": (64, 64, "calls outstanding per connection"),
    },
}

SCALES = {
    # Driver settings per scale; every one is also a flag of `run`.
    "ci": {"max_inflight_bytes": 256 * MiB, "grpc_memory_bytes": 256 * MiB,
           "hold_s": 6.0, "settle_s": 3.0,
           "idle_s": 1.0, "lead_s": 0.5, "victim_warmup_s": 1.0,
           "victim_rate": 200.0, "rss_safety_mib": 3072},
    "full": {"max_inflight_bytes": 0, "grpc_memory_bytes": 0,
             "hold_s": 30.0, "settle_s": 10.0,
             "idle_s": 3.0, "lead_s": 1.0, "victim_warmup_s": 2.0,
             "victim_rate": 200.0, "rss_safety_mib": 0},
}


def attack_params(name, scale, overrides):
    column = 0 if scale == "ci" else 1
    params = {k: v[column] for k, v in PARAMS[name].items()}
    for dotted, value in overrides.items():
        attack, _, param = dotted.partition(".")
        if attack == name:
            params[param] = value
    return params


def parse_set(items):
    """--set ATTACK.PARAM=VALUE, typed like the parameter's default."""
    out = {}
    for item in items or []:
        dotted, sep, text = item.partition("=")
        attack, _, param = dotted.partition(".")
        if not sep or attack not in PARAMS or param not in PARAMS[attack]:
            raise SystemExit("--set %s: expected ATTACK.PARAM=VALUE with a "
                             "parameter from `attack.py params`" % item)
        default = PARAMS[attack][param][0]
        if isinstance(default, bool):
            value = text.lower() in ("1", "true", "yes", "on")
        elif isinstance(default, int):
            value = int(float(text))
        elif isinstance(default, float):
            value = float(text)
        else:
            value = text
        out[dotted] = value
    return out


def mib(n):
    return None if n is None else round(n / MiB, 1)
