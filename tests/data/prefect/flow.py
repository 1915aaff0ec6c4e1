"""A Prefect 3 flow for pipetrace's tests: tasks called directly (on the flow's thread) and
submitted ones (on pool threads), each running subprocesses, a nested subflow and a task
that fails. What ran is judged from Prefect's own database, not from names here."""
import subprocess
import sys

from prefect import flow, task


@task
def checksum(path):
    subprocess.run(["sha256sum", path], check=True, capture_output=True)
    subprocess.run("sleep 0.2; wc -c " + path, shell=True, check=True, capture_output=True)


@task
def sort_words(n):
    subprocess.run(["sleep", "0.%d" % (3 + n)], check=True)
    subprocess.run(["sort", "/etc/services"], check=True, capture_output=True)


@task
def compress(n):
    subprocess.run(["gzip", "-c", "/etc/services"], check=True, capture_output=True)


@task(retries=0)
def flaky():
    subprocess.run(["false"], check=True)


@flow
def inner_flow():
    compress(7)


@flow
def lab_pipeline(fail: bool = False):
    checksum("/etc/hostname")
    futures = [sort_words.submit(i) for i in range(3)]
    for f in futures:
        f.result()
    inner_flow()
    if fail:
        flaky()


if __name__ == "__main__":
    lab_pipeline(fail=len(sys.argv) > 1)
