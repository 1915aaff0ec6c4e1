# Hands its own output path to a tool (cp), so a tool under the wrong job's task shows.
import os
import subprocess
import tempfile
import time

time.sleep(0.1)
n = len(open(snakemake.input[0]).read().splitlines())
fd, tmp = tempfile.mkstemp()
with os.fdopen(fd, "w") as f:
    f.write("%s\t%d\n" % (snakemake.wildcards.s, n))
subprocess.run(["cp", tmp, snakemake.output[0]], check=True)
os.remove(tmp)
