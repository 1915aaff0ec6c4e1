"""A Prefect 3 flow whose task runs wait on others: three submitted `make` runs, each followed
by a `use` run submitted at once that takes its future (Pending in Prefect's database until
its `make` completes), then a last task called directly. The flow is named by the first
argument."""
import subprocess
import sys

from prefect import flow, task


@task
def make(i):
    subprocess.run(["sleep", "8"], check=True)
    return i


@task
def use(x):
    subprocess.run(["sleep", "5"], check=True)
    return x


@task
def summary(xs):
    return sum(xs)


@flow
def chain():
    made = [make.submit(i) for i in range(3)]
    used = [use.submit(m) for m in made]
    summary([u.result() for u in used])


if __name__ == "__main__":
    chain.with_options(name=sys.argv[1])()
