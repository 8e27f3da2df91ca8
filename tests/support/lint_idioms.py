"""Configs written the way Triton's documentation and example repositories write them.

Written afresh for the tests, covering their idioms: the Python backend's examples (add_sub,
BLS, a decoupled model, optional inputs, an execution environment), the quick-start
repository (ONNX with reshape and labels, TensorFlow graphdefs with strings and a sequence
model), an ensemble, batching with preferred sizes and warm-up, GPU instances with a
TensorRT accelerator, TorchScript's ``INPUT__0`` names with the response cache, a TensorRT
plan, the vLLM backend's model.json, implicit state, the identity backend. Lint must find
nothing to warn about in any of them.
"""

from __future__ import annotations

from pathlib import Path

MODELS: dict[str, tuple[str, tuple[str, ...]]] = {
    "add_sub": (
        """name: "add_sub"
backend: "python"

input [
  {
    name: "INPUT0"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }
]
input [
  {
    name: "INPUT1"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }
]
output [
  {
    name: "OUTPUT0"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }
]
output [
  {
    name: "OUTPUT1"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }
]

instance_group [{ kind: KIND_CPU }]
""",
        ("1/model.py",),
    ),
    "bls_sync": (
        """name: "bls_sync"
backend: "python"

input [
  {
    name: "MODEL_NAME"
    data_type: TYPE_STRING
    dims: [ 1 ]
  }
]
input [
  {
    name: "INPUT0"
    data_type: TYPE_FP32
    dims: [ 16 ]
  }
]
input [
  {
    name: "INPUT1"
    data_type: TYPE_FP32
    dims: [ 16 ]
  }
]
output [
  {
    name: "OUTPUT0"
    data_type: TYPE_FP32
    dims: [ 16 ]
  }
]
output [
  {
    name: "OUTPUT1"
    data_type: TYPE_FP32
    dims: [ 16 ]
  }
]

instance_group [{ kind: KIND_CPU }]
""",
        ("1/model.py",),
    ),
    "densenet_onnx": (
        """name: "densenet_onnx"
platform: "onnxruntime_onnx"
max_batch_size : 0
input [
  {
    name: "data_0"
    data_type: TYPE_FP32
    format: FORMAT_NCHW
    dims: [ 3, 224, 224 ]
    reshape { shape: [ 1, 3, 224, 224 ] }
  }
]
output [
  {
    name: "fc6_1"
    data_type: TYPE_FP32
    dims: [ 1000 ]
    reshape { shape: [ 1, 1000, 1, 1 ] }
    label_filename: "densenet_labels.txt"
  }
]
""",
        ("1/model.onnx", "densenet_labels.txt"),
    ),
    "ensemble_add_sub": (
        """name: "ensemble_add_sub"
platform: "ensemble"
max_batch_size: 0
input [
  {
    name: "IN0"
    data_type: TYPE_FP32
    dims: [ 4 ]
  },
  {
    name: "IN1"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }
]
output [
  {
    name: "SUM"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }
]
ensemble_scheduling {
  step [
    {
      model_name: "add_sub"
      model_version: -1
      input_map {
        key: "INPUT0"
        value: "IN0"
      }
      input_map {
        key: "INPUT1"
        value: "IN1"
      }
      output_map {
        key: "OUTPUT0"
        value: "SUM"
      }
    }
  ]
}
""",
        (),
    ),
    "identity_dynamic": (
        """name: "identity_dynamic"
backend: "identity"
max_batch_size: 0
version_policy: { all { }}
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ -1 ] } ]
""",
        (),
    ),
    "implicit_state": (
        """name: "implicit_state"
backend: "python"
max_batch_size: 0
sequence_batching {
  direct { }
  max_sequence_idle_microseconds: 5000000
  control_input [
    {
      name: "START"
      control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ]
    }
  ]
  state [
    {
      input_name: "INPUT_STATE"
      output_name: "OUTPUT_STATE"
      data_type: TYPE_INT32
      dims: [ 1 ]
    }
  ]
}
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
""",
        ("1/model.py",),
    ),
    "inception_graphdef": (
        """name: "inception_graphdef"
platform: "tensorflow_graphdef"
max_batch_size: 128
input [
  {
    name: "input"
    data_type: TYPE_FP32
    format: FORMAT_NHWC
    dims: [ 299, 299, 3 ]
  }
]
output [
  {
    name: "InceptionV3/Predictions/Softmax"
    data_type: TYPE_FP32
    dims: [ 1001 ]
    label_filename: "inception_labels.txt"
  }
]
instance_group [
  {
    kind: KIND_GPU
  }
]
optimization { execution_accelerators {
  gpu_execution_accelerator : [ {
    name : "tensorrt"
    parameters { key: "precision_mode" value: "FP16" }
    parameters { key: "max_workspace_size_bytes" value: "1073741824" }
    }]
}}
""",
        ("1/model.graphdef", "inception_labels.txt"),
    ),
    "optional_in": (
        """name: "optional_in"
backend: "python"
max_batch_size: 4
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] optional: true }
]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
parameters: {
  key: "EXECUTION_ENV_PATH",
  value: {string_value: "$$TRITON_MODEL_DIRECTORY/env.tar.gz"}
}
instance_group [{ kind: KIND_CPU }]
""",
        ("1/model.py",),
    ),
    "preferred": (
        """name: "preferred"
backend: "onnxruntime"
max_batch_size: 16
input [ { name: "x" data_type: TYPE_FP32 dims: [ 8 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 8 ] } ]
dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 100
}
""",
        ("1/model.onnx",),
    ),
    "resnet_batched": (
        """name: "resnet_batched"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  {
    name: "input"
    data_type: TYPE_FP32
    dims: [ 3, -1, -1 ]
  }
]
output [
  {
    name: "output"
    data_type: TYPE_FP32
    dims: [ 1000 ]
  }
]
dynamic_batching { }
version_policy: { latest: { num_versions: 1 } }
instance_group [
  {
    count: 2
    kind: KIND_CPU
  }
]
parameters { key: "intra_op_thread_count" value: { string_value: "1" } }
model_warmup [
  {
    name: "warmup"
    batch_size: 1
    inputs {
      key: "input"
      value: {
        data_type: TYPE_FP32
        dims: [ 3, 224, 224 ]
        zero_data: true
      }
    }
  }
]
""",
        ("1/model.onnx",),
    ),
    "resnet_libtorch": (
        """platform: "pytorch_libtorch"
max_batch_size: 32
input [
  {
    name: "INPUT__0"
    data_type: TYPE_FP32
    dims: [ 3, 224, 224 ]
  }
]
output [
  {
    name: "OUTPUT__0"
    data_type: TYPE_FP32
    dims: [ 1000 ]
  }
]
dynamic_batching { }
response_cache { enable: true }
""",
        ("1/model.pt",),
    ),
    "simple": (
        """name: "simple"
platform: "tensorflow_graphdef"
max_batch_size: 8
input [
  {
    name: "INPUT0"
    data_type: TYPE_INT32
    dims: [ 16 ]
  },
  {
    name: "INPUT1"
    data_type: TYPE_INT32
    dims: [ 16 ]
  }
]
output [
  {
    name: "OUTPUT0"
    data_type: TYPE_INT32
    dims: [ 16 ]
  },
  {
    name: "OUTPUT1"
    data_type: TYPE_INT32
    dims: [ 16 ]
  }
]
""",
        ("1/model.graphdef",),
    ),
    "simple_dyna_sequence": (
        """name: "simple_dyna_sequence"
platform: "tensorflow_graphdef"
max_batch_size: 8
sequence_batching {
  max_sequence_idle_microseconds: 5000000
  oldest
    {
      max_candidate_sequences: 4
    }
  control_input [
    {
      name: "START"
      control [
        {
          kind: CONTROL_SEQUENCE_START
          fp32_false_true: [ 0, 1 ]
        }
      ]
    },
    {
      name: "END"
      control [
        {
          kind: CONTROL_SEQUENCE_END
          fp32_false_true: [ 0, 1 ]
        }
      ]
    },
    {
      name: "READY"
      control [
        {
          kind: CONTROL_SEQUENCE_READY
          fp32_false_true: [ 0, 1 ]
        }
      ]
    },
    {
      name: "CORRID"
      control [
        {
          kind: CONTROL_SEQUENCE_CORRID
          data_type: TYPE_INT32
        }
      ]
    }
  ]
}
input [
  {
    name: "INPUT"
    data_type: TYPE_INT32
    dims: [ 1 ]
  }
]
output [
  {
    name: "OUTPUT"
    data_type: TYPE_INT32
    dims: [ 1 ]
  }
]
instance_group [
  {
    count: 1
    kind: KIND_CPU
  }
]
""",
        ("1/model.graphdef",),
    ),
    "simple_string": (
        """name: "simple_string"
platform: "tensorflow_graphdef"
max_batch_size: 8
input [
  {
    name: "INPUT0"
    data_type: TYPE_STRING
    dims: [ 16 ]
  },
  {
    name: "INPUT1"
    data_type: TYPE_STRING
    dims: [ 16 ]
  }
]
output [
  {
    name: "OUTPUT0"
    data_type: TYPE_STRING
    dims: [ 16 ]
  },
  {
    name: "OUTPUT1"
    data_type: TYPE_STRING
    dims: [ 16 ]
  }
]
""",
        ("1/model.graphdef",),
    ),
    "square_int32": (
        """name: "square_int32"
backend: "python"
max_batch_size: 0
model_transaction_policy {
  decoupled: True
}
input [
  {
    name: "IN"
    data_type: TYPE_INT32
    dims: [ 1 ]
  }
]
output [
  {
    name: "OUT"
    data_type: TYPE_INT32
    dims: [ 1 ]
  }
]
instance_group [{ kind: KIND_CPU }]
""",
        ("1/model.py",),
    ),
    "trt_model": (
        """name: "trt_model"
platform: "tensorrt_plan"
max_batch_size: 8
input [ { name: "images" data_type: TYPE_FP32 dims: [ 3, 640, 640 ] } ]
output [ { name: "output0" data_type: TYPE_FP32 dims: [ 84, 8400 ] } ]
instance_group [ { count: 1 kind: KIND_GPU gpus: [ 0 ] } ]
dynamic_batching { max_queue_delay_microseconds: 100 }
""",
        ("1/model.plan",),
    ),
    "vllm_model": (
        """backend: "vllm"

# The usage of device is deferred to the vLLM engine
instance_group [
  {
    count: 1
    kind: KIND_MODEL
  }
]
""",
        ("1/model.json",),
    ),
}
"""Per model directory: its config.pbtxt and the files beside it (relative paths)."""


def write_idioms(repository: Path) -> Path:
    """The models as a repository, each file beside its config (model files empty, labels one line)."""
    for name, (config, files) in MODELS.items():
        directory = repository / name
        (directory / "1").mkdir(parents=True)
        (directory / "config.pbtxt").write_text(config)
        for file in files:
            path = directory / file
            path.parent.mkdir(parents=True, exist_ok=True)
            content = '{"model": "facebook/opt-125m"}\n' if file.endswith("model.json") else ""
            path.write_text(content or ("label\n" if file.endswith(".txt") else ""))
    return repository
