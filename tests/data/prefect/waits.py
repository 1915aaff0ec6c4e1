"""A Prefect 3 flow whose body, between two task runs, keeps starting processes until a file
exists, so that another client's flow on the same standing server runs meanwhile. Every
shell command a task run starts carries `TR=<id>`, the id Prefect gave it, and the body's
carry `BODY`, so the test judges each process by Prefect's own record."""
import os
import subprocess
import sys
import time

from prefect import flow, task
from prefect.runtime import task_run


def sh(cmd):
    subprocess.run(["sh", "-c", ": TR=%s; %s" % (task_run.id, cmd)], check=True)


@task
def first():
    sh("echo first")


@task
def last():
    sh("echo last")


@flow
def waits(mark: str):
    first()
    deadline = time.time() + 120
    while not os.path.exists(mark) and time.time() < deadline:
        subprocess.run(["sh", "-c", ": BODY; sleep 0.2"], check=True)
    last()


if __name__ == "__main__":
    waits(sys.argv[1])
