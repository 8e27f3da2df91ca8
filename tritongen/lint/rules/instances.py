"""Instance-group rules: kinds, GPU ids, counts and TensorRT profiles."""

from __future__ import annotations

from tritongen.lint.rules.context import ModelContext, enum_name


def check_instance_groups(ctx: ModelContext) -> None:
    """Kinds, GPU ids, counts and profiles of the instance groups."""
    if ctx.is_ensemble:
        return
    for index, group in enumerate(ctx.config.instance_group):
        path, kind = f"instance_group[{index}]", enum_name(group, "kind")
        if group.count < 1 and ctx.wrote(f"{path}.count"):  # left out, Triton's default is meant
            ctx.warning(
                "instance-group.count",
                f"{path}.count",
                f"count {group.count} is written, but Triton runs its default instead (1, or 2 on CPU "
                "for some backends)",
                "set count: 1 or more, or leave count out for Triton's default",
            )
        if kind in ("KIND_CPU", "KIND_MODEL") and group.gpus:
            ctx.error(
                "instance-group.gpus-on-cpu",
                f"{path}.gpus",
                f"{kind} instances cannot name GPUs",
                "drop gpus, or use kind: KIND_GPU",
            )
        negative = [g for g in group.gpus if g < 0]
        if negative:
            ctx.error(
                "instance-group.gpu-id",
                f"{path}.gpus",
                f"GPU id {negative[0]} is negative",
                "use GPU ids from 0",
            )
        if group.profile and ctx.platform != "tensorrt_plan":
            ctx.error(
                "instance-group.profile",
                f"{path}.profile",
                "profile is only for TensorRT models",
                "drop profile",
            )
        for profile in group.profile if ctx.platform == "tensorrt_plan" else []:
            if not profile.isdigit():
                ctx.error(
                    "instance-group.profile",
                    f"{path}.profile",
                    f"profile '{profile}' is not a non-negative integer",
                    "name TensorRT optimisation profiles by number",
                )
