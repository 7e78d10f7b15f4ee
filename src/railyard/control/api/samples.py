"""``GET /v1/jobs/{id}/samples``: a job's resource history (GPU utilisation, memory, power,
temperature; host CPU and memory), bucketed (`control.usecases.jobsamples`), as JSON or CSV."""

from __future__ import annotations

from typing import Annotated, Literal, cast

from fastapi import Query
from fastapi.responses import Response as HttpResponse

from railyard.client import wire
from railyard.control.api.deps import CurrentUser, SessionDep, v1_router
from railyard.control.api.wiremodels import model_of
from railyard.control.schemas import Response
from railyard.control.usecases import joblookup, jobsamples

router = v1_router()


SamplesOut = model_of(wire.Samples, "SamplesOut", {wire.SamplePoint: "SamplePointOut"})


@router.get(
    "/jobs/{job_id}/samples",
    response_model=None,
    responses={200: {"model": SamplesOut, "content": {"text/csv": {}}}},
)
def job_samples(
    job_id: str,
    session: SessionDep,
    user: CurrentUser,
    points: Annotated[int, Query(ge=1, le=jobsamples.MAX_POINTS)] = jobsamples.DEFAULT_POINTS,
    since_t_s: Annotated[float | None, Query(ge=0, le=1e11, description="Unix time")] = None,
    out: Annotated[Literal["json", "csv"], Query(alias="format")] = "json",
) -> Response | HttpResponse:
    """At most ``points`` buckets, each the mean of the samples in it: the job's mean GPU
    utilisation, summed GPU memory and power, hottest GPU, summed host CPU (100: one core)
    and resident memory; ``gpus`` each GPU's utilisation (``node:index``). One request reads
    at most 200,000 rows (a 256-node job keeps that many in 15 minutes): ``partial`` then says
    only the newest part is here, or from ``since_t_s`` on, the oldest; page with
    ``since_t_s``."""
    row, _ = joblookup.get_job(session, user, job_id)  # 404 unless the reader may see it
    found = jobsamples.history(session, row.id, points=points, since_t_s=since_t_s)
    if out == "csv":
        disposition = f'attachment; filename="job-{row.id}-samples.csv"'
        return HttpResponse(jobsamples.to_csv(found), media_type="text/csv",
                            headers={"Content-Disposition": disposition})  # fmt: skip
    return SamplesOut.model_validate(
        wire.Samples(
            job_id=row.id,
            bucket_s=found.bucket_s,
            readings=found.readings,
            partial=found.partial,
            gpus=found.gpu_names(),
            points=[cast(wire.SamplePoint, vars(b)) for b in found.buckets],
        )
    )  # the model's floats: a bucket width may be a whole number
