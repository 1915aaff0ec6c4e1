"""flow.py's flow served by `flow.serve()`: each run the server asks for runs in a process of
its own (`python -m prefect.engine`) that the serving process starts."""
from flow import lab_pipeline

if __name__ == "__main__":
    lab_pipeline.serve(name="served")
