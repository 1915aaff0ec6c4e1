"""Prefect 3 task runs called one after another on the flow's thread, each starting
processes up to its last moment: a task run that retries, one that fails while the flow goes
on, names from templates and with_options, and a cached task run. Every shell command carries
`TR=<id>`, the id Prefect gave the task run that started it, so the test can judge each
process by Prefect's own record."""
import os
import subprocess
import sys

from prefect import flow, task
from prefect.cache_policies import INPUTS
from prefect.runtime import task_run


def sh(cmd):
    subprocess.run(["sh", "-c", ": TR=%s; %s" % (task_run.id, cmd)], check=True)


@task
def many(n):
    for i in range(3):
        sh("echo %d.%d" % (n, i))
    subprocess.run(["sleep", "0.1"], check=True)
    sh("wc -l /etc/services")


@task(task_run_name="sample-{name}")
def sample(name):
    sh("sort /etc/services | head -1")


@task(retries=2, retry_delay_seconds=0)
def flaky(mark):
    sh("sleep 0.1")
    if not os.path.exists(mark):
        open(mark, "w").close()
        raise RuntimeError("the first try fails")
    sh("echo ok")


@task
def broken():
    sh("sleep 0.1")
    sh("exit 3")


@task(cache_policy=INPUTS)
def cached(x):
    sh("echo cached %s" % x)


@flow
def called_tasks(mark: str):
    many(1)
    sample("a")
    many(2)
    flaky(mark)
    broken(return_state=True)
    many.with_options(name="renamed")(3)
    cached(1)
    cached(1)
    sample("b")


if __name__ == "__main__":
    called_tasks(sys.argv[1])
