# A Python script: Snakemake's pickled `snakemake` object carries the job's paths.
import os
import subprocess
import tempfile
import time

time.sleep(0.2)
lines = open(snakemake.input.seeds).read().splitlines()
fd, tmp = tempfile.mkstemp()
with os.fdopen(fd, "w") as f:
    f.write("%s\t%d\n" % (snakemake.wildcards.s, len(lines)))
subprocess.run(["cp", tmp, snakemake.output[0]], check=True)
os.remove(tmp)
