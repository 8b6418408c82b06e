"""``pathweave jobs requeue`` (admin): queue again the documents whose newest version failed
or whose worker died with their lease (:func:`pathweave_ingest.jobs.requeue`). With a broker
(``PATHWEAVE_WORKER_BROKER_URL``) the batches go to the Celery workers; without one this
command runs them itself. :mod:`pathweave_cli.main` mounts :data:`jobs_app`."""

from __future__ import annotations

from typing import Optional

import typer

from pathweave.terminal import console

jobs_app = typer.Typer(help="Ingestion jobs: queue failed or stuck documents again.", no_args_is_help=True)


@jobs_app.command("requeue")
def jobs_requeue(
    tenant: Optional[str] = typer.Option(None, help="Tenant (default from settings)."),
    failed: bool = typer.Option(True, "--failed/--no-failed", help="Also the failed versions (attempts start over)."),
    queued: bool = typer.Option(False, "--queued", help="Also the versions still queued (their message may be lost; "
                                                        "one delivered twice runs once)."),
) -> None:
    """Queue again, as one new job, the tenant's failed documents, those whose worker died
    with their lease and, with --queued, those still queued (a newer write of a document
    still wins). Prints the job id and count."""
    from pathweave.settings import get_settings
    from pathweave_ingest import jobs
    from pathweave_ingest.tasks import run_batch_with_retries
    from pathweave_ingest.worker_runtime import Runtime

    settings = get_settings()
    settings = settings.model_copy(update={"tenant": tenant}) if tenant else settings
    ws = settings.worker
    runtime = Runtime(settings, ws)
    try:
        store = runtime.store(settings.tenant)
        size = ws.batch_size(runtime.device)
        sub = jobs.requeue(store, jobs.new_job_id(), size, "celery" if ws.broker_url else "inprocess", failed, queued)
        if not sub.to_enqueue:
            console.print("nothing to queue again")
            return
        batches = jobs.batches_of(sub.to_enqueue, size)
        if ws.broker_url:
            from pathweave_api.services import CeleryDispatcher

            CeleryDispatcher(ws).submit_all(settings.tenant, sub.job_id, batches)
            console.print(f"job {sub.job_id}: {len(sub.to_enqueue)} document(s) queued again for the workers")
            return
        done = failed_n = 0
        for batch in batches:
            outcome = run_batch_with_retries(runtime, settings.tenant, sub.job_id, batch)
            done, failed_n = done + len(outcome.done), failed_n + len(outcome.failed)
        console.print(f"job {sub.job_id}: {len(sub.to_enqueue)} document(s) run again here: {done} done, "
                      f"{failed_n} failed")
    finally:
        runtime.close()
