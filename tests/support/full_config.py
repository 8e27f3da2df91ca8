"""A ModelConfig that sets every field tritongen models, for round-trip tests."""

from __future__ import annotations

from tritongen.triton.model_config import (
    Accelerator,
    CudaOptimization,
    DynamicBatching,
    ExecutionAccelerators,
    GraphOptimization,
    InstanceGroup,
    ModelConfig,
    ModelInput,
    ModelOutput,
    ModelWarmup,
    Optimization,
    PinnedMemory,
    QueuePolicy,
    Reshape,
    ResponseCache,
    VersionPolicy,
    VersionSpecific,
    WarmupInput,
)


def full_config() -> ModelConfig:
    return ModelConfig(
        name="full_model",
        backend="onnxruntime",
        platform="onnxruntime_onnx",
        default_model_filename="model.onnx",
        version_policy=VersionPolicy(specific=VersionSpecific(versions=[1, 3])),
        max_batch_size=32,
        input=[
            ModelInput(
                name="input_ids", data_type="TYPE_INT64", dims=[-1], allow_ragged_batch=True, optional=True
            ),
            ModelInput(
                name="scalar",
                data_type="TYPE_FP32",
                dims=[1],
                reshape=Reshape(shape=[]),
                is_shape_tensor=True,
            ),
        ],
        output=[
            ModelOutput(
                name="logits",
                data_type="TYPE_FP16",
                dims=[-1, 4],
                reshape=Reshape(shape=[2, 2]),
                label_filename="labels.txt",
                is_shape_tensor=True,
            )
        ],
        dynamic_batching=DynamicBatching(
            preferred_batch_size=[4, 8, 16],
            max_queue_delay_microseconds=500,
            preserve_ordering=True,
            priority_levels=2,
            default_priority_level=1,
            default_queue_policy=QueuePolicy(
                timeout_action="DELAY",
                default_timeout_microseconds=1000,
                allow_timeout_override=True,
                max_queue_size=64,
            ),
            priority_queue_policy={2: QueuePolicy(max_queue_size=8)},
        ),
        instance_group=[
            InstanceGroup(
                name="gpu_group",
                kind="KIND_GPU",
                count=2,
                gpus=[0, 1],
                profile=["0"],
                passive=True,
                host_policy="numa0",
            ),
            InstanceGroup(kind="KIND_CPU", count=1),
        ],
        optimization=Optimization(
            graph=GraphOptimization(level=1),
            priority="PRIORITY_MAX",
            cuda=CudaOptimization(graphs=True, busy_wait_events=True, output_copy_stream=True),
            execution_accelerators=ExecutionAccelerators(
                gpu_execution_accelerator=[
                    Accelerator(
                        name="tensorrt",
                        parameters={"precision_mode": "FP16", "max_workspace_size_bytes": "1073741824"},
                    )
                ],
                cpu_execution_accelerator=[Accelerator(name="openvino")],
            ),
            input_pinned_memory=PinnedMemory(enable=False),
            output_pinned_memory=PinnedMemory(enable=True),
        ),
        model_warmup=[
            ModelWarmup(
                name='warm "zero"',
                batch_size=4,
                count=2,
                inputs={
                    "input_ids": WarmupInput(data_type="TYPE_INT64", dims=[128], zero_data=True),
                    "scalar": WarmupInput(data_type="TYPE_FP32", dims=[1], input_data_file="scalar.bin"),
                },
            ),
            ModelWarmup(
                name="rand",
                batch_size=1,
                inputs={"input_ids": WarmupInput(data_type="TYPE_INT64", dims=[8], random_data=True)},
            ),
        ],
        response_cache=ResponseCache(enable=True),
        parameters={"intra_op_thread_count": "2", "unicode ☃": 'naïve\n"quoted"\\'},
        passthrough="model_transaction_policy {\n  decoupled: true\n}",
    )
