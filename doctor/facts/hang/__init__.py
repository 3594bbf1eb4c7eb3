"""A running job: each rank's stack and where it is, Flight Recorder, NCCL RAS, the shape of a
hang."""
