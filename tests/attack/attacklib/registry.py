"""The attacks by name (config.ATTACKS gives the order), and run_attack."""

import asyncio

from .connections import (attack_continuation, attack_fd_flood,
                          attack_idle_conns, attack_rapid_reset)
from .jobs import attack_bad_utf8, attack_open_jobs, attack_unread_results
from .memory import (attack_big_unary_unread, attack_budget_fill, attack_k0,
                     attack_partial_unary)


ATTACK_FUNCTIONS = {
    "budget-fill": attack_budget_fill,
    "partial-unary": attack_partial_unary,
    "big-unary-unread": attack_big_unary_unread,
    "open-jobs": attack_open_jobs,
    "unread-results": attack_unread_results,
    "k0": attack_k0,
    "fd-flood": attack_fd_flood,
    "rapid-reset": attack_rapid_reset,
    "continuation": attack_continuation,
    "idle-conns": attack_idle_conns,
    "bad-utf8": attack_bad_utf8,
}


async def run_attack(name, ctx):
    """An attack's figures; an attack that fails says so instead."""
    try:
        return await ATTACK_FUNCTIONS[name](ctx)
    except asyncio.CancelledError:
        return ctx.result(error="cancelled: did not end in time")
    except Exception as e:  # pylint: disable=broad-except
        return ctx.result(error="%s: %s" % (type(e).__name__, e))
