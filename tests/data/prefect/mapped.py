"""Prefect 3 task runs that run together: `.map()` of ten over a thread pool of four workers,
each of the same length and each starting processes, so their threads fork within
milliseconds of each other and each runs several task runs in turn. Every
shell command carries `TR=<id>`, the id Prefect gave the task run that started it, so the
test can judge each process by Prefect's own record.

Prefect's temporary server stops with this process and drops the task-run events it has not
written yet (on a loaded machine, whole task runs): the script waits, up to a minute, until
the server has recorded all ten as ended, so that the test judges by complete records."""
import subprocess
import time

from prefect import flow, get_client, task
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
from prefect.runtime import task_run
from prefect.task_runners import ThreadPoolTaskRunner

RUNS = 10


def sh(cmd):
    subprocess.run(["sh", "-c", ": TR=%s; %s" % (task_run.id, cmd)], check=True)


@task
def work(n):
    sh("sleep 0.2")
    sh("echo %d" % n)


@flow(task_runner=ThreadPoolTaskRunner(max_workers=4))
def mapped():
    work.map(list(range(RUNS))).wait()


def recorded(flow_run_id):
    """The task runs of the flow run the server has recorded as ended."""
    runs = FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
    with get_client(sync_client=True) as client:
        return [t for t in client.read_task_runs(flow_run_filter=runs) if t.end_time]


if __name__ == "__main__":
    state = mapped(return_state=True)
    flow_run_id = state.state_details.flow_run_id
    deadline = time.monotonic() + 60
    while len(recorded(flow_run_id)) < RUNS and time.monotonic() < deadline:
        time.sleep(0.2)
