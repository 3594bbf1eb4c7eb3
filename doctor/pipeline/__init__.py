"""One run of the doctor: the request, the steps in order (steps), saved captures and baselines, the
SLURM prolog."""
