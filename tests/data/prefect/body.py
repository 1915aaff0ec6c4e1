"""A Prefect 3 flow whose body runs programs itself, outside any task run: just after it
submits a task run (some before Prefect stamps that running), and just after it ends. Task
runs' shell commands carry `TR=<id>`, the id Prefect gave the task run; the body's `BODY`.
The script runs a setup step of its own (`SETUP`) before it calls the flow."""
import subprocess

from prefect import flow, task
from prefect.runtime import task_run


@task
def slow(n):
    subprocess.run(["sh", "-c", ": TR=%s; sleep 0.5" % task_run.id], check=True)


@flow
def body_and_tasks():
    future = slow.submit(1)
    for _ in range(8):
        subprocess.run(["sh", "-c", ": BODY; sleep 0.02"], check=True)
    future.result()
    subprocess.run(["sh", "-c", ": BODY; true"], check=True)


if __name__ == "__main__":
    subprocess.run(["sh", "-c", ": SETUP; true"], check=True)
    body_and_tasks()
