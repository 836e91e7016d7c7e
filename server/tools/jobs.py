"""The background-job tools, each named like its logic in research.jobs (server/jobs/)."""

from autoresearch_mcp.contract.arguments import GetJobArgs, SubmitTrainingJobArgs
from autoresearch_mcp.contract.models import JobInfo, Run
from autoresearch_mcp.server.events import Progress
from autoresearch_mcp.server.research import Research


def submit_training_job(research: Research, run: Run, args: SubmitTrainingJobArgs) -> JobInfo:
    return research.jobs.submit_training_job(run, args.params, args.note, args.base)


def get_job(research: Research, args: GetJobArgs, progress: Progress) -> JobInfo:
    return research.jobs.get_job(args.job_id, args.wait_seconds, progress)
