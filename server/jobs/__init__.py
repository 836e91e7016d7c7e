"""Background jobs: the service that records them (service.py), where they run (executors.py), the work
one job does (job.py) and the local worker process (worker.py). Nothing is imported here: a worker
process imports this package first, and should not pay for the server's side of it."""
