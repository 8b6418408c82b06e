"""Routes ``GET /v1/jobs/{job_id}`` (an ingestion job's progress) and ``POST
/v1/jobs/requeue`` (admin: run again the documents that failed or whose worker died)."""

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Response
from fastapi.concurrency import run_in_threadpool

from pathweave_api.auth import IngestKey, scoped
from pathweave_api.callers import Caller
from pathweave_api.keys import ApiKey
from pathweave_api.models import HEX32_PATTERN, JobResponse, SubmitResponse
from pathweave_api.problems import ApiProblem, errors
from pathweave_api.services import ServicesDep
from pathweave_api.submissions import check_queue, dispatch
from pathweave_ingest import jobs

router = APIRouter()


@router.get("/v1/jobs/{job_id}", response_model=JobResponse, tags=["documents"], summary="A job's progress",
         responses=errors(404, 422))
def get_job(key: IngestKey, access: Caller, svc: ServicesDep,
            job_id: Annotated[str, Path(pattern=HEX32_PATTERN, description="Job id.",
                                        examples=["8c1f3e2d9a7b4c6e8f0a1b2c3d4e5f60"])]):
    job = svc.guard(jobs.job_status, svc.reader_store(key.tenant, access), job_id, access)
    if job is None:
        raise ApiProblem(404, f"no job {job_id} for this tenant", "not-found")
    return job


@router.post("/v1/jobs/requeue", status_code=202, response_model=SubmitResponse, tags=["documents"],
             summary="Queue failed and stuck documents again (admin)",
             description=("Queues again, as one new job, the tenant's documents whose newest version failed "
                          "(`failed=true`, the default; their attempts start over) and those whose worker died "
                          "with their lease (always; their attempts are kept, so a document that kills its "
                          "workers still runs out), and with `queued=true` those still queued (their message may "
                          "be lost; one delivered twice runs once). Each keeps its version: a newer write still "
                          "wins. Answers 202 with the job (`Location: /v1/jobs/{id}`); `enqueued` 0 when nothing "
                          "needed it."),
             responses=errors(422))
async def requeue(response: Response, key: Annotated[ApiKey, Depends(scoped("admin"))], svc: ServicesDep,
                  failed: Annotated[bool, Query(description="Also the failed versions.")] = True,
                  queued: Annotated[bool, Query(description="Also the versions still queued.")] = False):
    def work():
        check_queue(svc, 1)
        store = svc.store(key.tenant)
        batch_size = svc.ws.batch_size(svc.runtime.device)
        sub = svc.guard(jobs.requeue, store, jobs.new_job_id(), batch_size, svc.dispatcher.mode, failed, queued)
        return dispatch(svc, key.tenant, store, sub, sub.to_enqueue)

    result = await run_in_threadpool(work)
    response.headers["Location"] = result["links"]["job"]
    return result
