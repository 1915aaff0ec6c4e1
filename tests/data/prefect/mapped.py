"""Prefect 3 task runs that run together: `.map()` of ten over a thread pool of four workers,
each of the same length and each starting processes, so their threads fork within
milliseconds of each other and each runs several task runs in turn. Every
shell command carries `TR=<id>`, the id Prefect gave the task run that started it, so the
test can judge each process by Prefect's own record."""
import subprocess

from prefect import flow, task
from prefect.runtime import task_run
from prefect.task_runners import ThreadPoolTaskRunner


def sh(cmd):
    subprocess.run(["sh", "-c", ": TR=%s; %s" % (task_run.id, cmd)], check=True)


@task
def work(n):
    sh("sleep 0.2")
    sh("echo %d" % n)


@flow(task_runner=ThreadPoolTaskRunner(max_workers=4))
def mapped():
    work.map(list(range(10))).wait()


if __name__ == "__main__":
    mapped()
