"""Route ``GET /v1/jobs/{job_id}``: an ingestion job's progress."""

from typing import Annotated

from fastapi import APIRouter, Path

from pathweave_api.auth import IngestKey
from pathweave_api.models import HEX32_PATTERN, JobResponse
from pathweave_api.problems import ApiProblem, errors
from pathweave_api.services import ServicesDep
from pathweave_ingest import jobs

router = APIRouter()


@router.get("/v1/jobs/{job_id}", response_model=JobResponse, tags=["documents"], summary="A job's progress",
         responses=errors(404, 422))
def get_job(key: IngestKey, svc: ServicesDep, job_id: Annotated[str, Path(pattern=HEX32_PATTERN, description="Job id.",
                                                        examples=["8c1f3e2d9a7b4c6e8f0a1b2c3d4e5f60"])]):
    job = svc.guard(jobs.job_status, svc.store(key.tenant), job_id)
    if job is None:
        raise ApiProblem(404, f"no job {job_id} for this tenant", "not-found")
    return job
