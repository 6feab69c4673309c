"""gemmbench_tables_common: what every table of gemmbench_tables shares: the
line that says where its figures come from, with a link to the report.
"""

import os

from gemmbench_env import repo_root


def num(value, spec=",.0f"):
    return "-" if value is None else format(value, spec)


def provenance(report, path):
    gpu = report["gpu"][0] if report.get("gpu") else None
    where = (f"{len(report['gpu'])} x {gpu['name']}, driver {gpu['driver']}" if gpu
             else f"{report['backend']} backend")
    cores = f", {report['host']['cpus']} host cores" if report["host"].get("cpus") else ""
    link = os.path.relpath(os.path.join(LINKS["root"], path), LINKS["doc_dir"])
    return (f"*{where}{cores}; {report['date'][:10]}, commit {report['commit']}; "
            f"report [`{path}`]({link})*")


# The repository and the folder of the document being rewritten: links in a
# document are relative to its folder.
LINKS = {"root": repo_root(), "doc_dir": repo_root()}
