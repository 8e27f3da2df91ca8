"""Hand-written Triton model configs with comments and odd formatting, as teams keep them in git."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Handwritten:
    """One config.pbtxt text and what it allows."""

    name: str  # unique, a valid model directory name; equals the text's `name:` where it has one
    text: str
    batching: bool  # max_batch_size > 0 in the text
    scheduler: str  # "dynamic", "none", "oldest", "direct" or "ensemble"
    instance_groups: int  # number of instance_group entries in the text


CORPUS: tuple[Handwritten, ...] = (
    # BSD licence header, list syntax for tensors and instance groups, trailing comments,
    # a commented-out field and a TensorRT accelerator for ONNX Runtime.
    Handwritten(
        name="resnet50_onnx",
        text="""\
# Copyright (c) 2021, NVIDIA CORPORATION. All rights reserved.
#
# Redistribution and use in source and binary forms, with or without
# modification, are permitted provided that the following conditions
# are met:
#  * Redistributions of source code must retain the above copyright
#    notice, this list of conditions and the following disclaimer.
#  * Redistributions in binary form must reproduce the above copyright
#    notice, this list of conditions and the following disclaimer in the
#    documentation and/or other materials provided with the distribution.
#  * Neither the name of NVIDIA CORPORATION nor the names of its
#    contributors may be used to endorse or promote products derived
#    from this software without specific prior written permission.
#
# THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS ``AS IS'' AND ANY
# EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
# IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR
# PURPOSE ARE DISCLAIMED.  IN NO EVENT SHALL THE COPYRIGHT OWNER OR
# CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL,
# EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO,
# PROCUREMENT OF SUBSTITUTE GOODS OR SERVICES; LOSS OF USE, DATA, OR
# PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND ON ANY THEORY
# OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT
# (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
# OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.

name: "resnet50_onnx"
platform: "onnxruntime_onnx"
max_batch_size: 16  # keep small, the T4s run out of memory above this

input [
  {
    name: "data"
    data_type: TYPE_FP32
    dims: [ 3, 224, 224 ]
  }
]
output [
  {
    name: "resnetv17_dense0_fwd"
    data_type: TYPE_FP32
    dims: [ 1000 ]
    label_filename: "densenet_labels.txt"
  }
]

dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  # max_queue_delay_microseconds: 100
}

instance_group [
  {
    count: 2  # one per stream
    kind: KIND_GPU
  }
]

# TensorRT through ONNX Runtime: ~2x faster on T4, see PERF-1187
optimization {
  execution_accelerators {
    gpu_execution_accelerator: [
      {
        name: "tensorrt"
        parameters { key: "precision_mode" value: "FP16" }
        parameters { key: "max_workspace_size_bytes" value: "1073741824" }
      }
    ]
  }
}
""",
        batching=True,
        scheduler="dynamic",
        instance_groups=1,
    ),
    # Apache licence header, max_batch_size 0 with a reshape and no scheduler or instance group.
    Handwritten(
        name="densenet_onnx",
        text="""\
# Copyright 2020 The Vision Team
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
#
# ---------------------------------------------------------------------
# DenseNet-121 exported from torchvision with opset 11.
#
# The model was exported without a dynamic batch axis, so Triton must
# not batch it: max_batch_size stays 0 and the full shape, batch
# dimension included, is given in the reshape below.
#
# Owner: vision-platform@ (ping #vision-infra on Slack)
# ---------------------------------------------------------------------

name: "densenet_onnx"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [
  {
    name: "data_0"
    data_type: TYPE_FP32
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
        batching=False,
        scheduler="none",
        instance_groups=0,
    ),
    # TensorRT plan with repeated `input { }` blocks, `[-1]` dims, a multi-line preferred list
    # and two instance groups pinned to different GPUs.
    Handwritten(
        name="bert_large_trt",
        text="""\
# BERT-large, seq len up to 384, built with trtexec --fp16 --best
name: "bert_large_trt"
platform: "tensorrt_plan"
max_batch_size: 32

input {
  name: "input_ids"
  data_type: TYPE_INT32
  dims: [-1]
}
input {
  name: "segment_ids"
  data_type: TYPE_INT32
  dims: [-1]
}
input {
  name: "input_mask"
  data_type: TYPE_INT32
  dims: [-1]
}

output {
  name: "cls_squad_logits"
  data_type: TYPE_FP32
  dims: [-1, 2]
}

dynamic_batching {
  preferred_batch_size: [
    8,
    16,
    32
  ]
  max_queue_delay_microseconds: 2000
  # preserve_ordering: true
}

# One instance per card; card 1 is shared with the tokenizer.
instance_group {
  count: 1
  kind: KIND_GPU
  gpus: [0]
}
instance_group {
  count: 1
  kind: KIND_GPU
  gpus: [1]
}
""",
        batching=True,
        scheduler="dynamic",
        instance_groups=2,
    ),
    # Python backend: string tensors, a one-line dynamic_batching, a CPU instance group in
    # list syntax, and parameter strings holding `#`, `{` and escaped quotes.
    Handwritten(
        name="text_classifier_py",
        text=r"""# Python backend text classifier (see model.py in this directory)
name: "text_classifier_py"
backend: "python"
max_batch_size: 64

input [
  {
    name: "TEXT"
    data_type: TYPE_STRING
    dims: [ 1 ]
  }
]
output [
  {
    name: "LABEL"
    data_type: TYPE_STRING
    dims: [ 1 ]
  },
  {
    name: "SCORE"
    data_type: TYPE_FP32
    dims: [ 1 ]
  }
]

dynamic_batching { max_queue_delay_microseconds: 100 }

instance_group [ { count: 3 kind: KIND_CPU } ]

parameters {
  key: "EXECUTION_ENV_PATH"
  value: { string_value: "$$TRITON_MODEL_DIRECTORY/env.tar.gz" }
}
parameters {
  key: "label_template"
  value: { string_value: "{\"label\": \"#%s\"}  # not a comment" }
}
parameters {
  key: "stop_chars"
  value: { string_value: "}{#;,\\" }
}
""",
        batching=True,
        scheduler="dynamic",
        instance_groups=1,
    ),
    # TorchScript with 4-space indentation, a multi-line dims list, default_model_filename and
    # an empty `dynamic_batching { }`.
    Handwritten(
        name="resnet18_libtorch",
        text="""\
name: "resnet18_libtorch"
platform: "pytorch_libtorch"
default_model_filename: "model.pt"
max_batch_size: 8

# LibTorch has no tensor names, Triton matches by position: INPUT__0, OUTPUT__0.
input [
    {
        name: "INPUT__0"
        data_type: TYPE_FP32
        dims: [
            3,
            224,
            224
        ]
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

instance_group [
    {
        count: 1
        kind: KIND_GPU
    }
]
""",
        batching=True,
        scheduler="dynamic",
        instance_groups=1,
    ),
    # OpenVINO backend indented with tabs, parameters for the backend, repeated instance group
    # block syntax with a single group.
    Handwritten(
        name="person_detection_ov",
        text="""\
# Intel person-detection-0200, IR v11
name: "person_detection_ov"
backend: "openvino"
max_batch_size: 8
input [
\t{
\t\tname: "image"
\t\tdata_type: TYPE_FP32
\t\tdims: [ 3, 256, 256 ]
\t}
]
output [
\t{
\t\tname: "detection_out"
\t\tdata_type: TYPE_FP32
\t\tdims: [ 1, 200, 7 ]
\t}
]
dynamic_batching {
\tpreferred_batch_size: [ 2, 4, 8 ]
\tmax_queue_delay_microseconds: 500
}
instance_group {
\tcount: 4
\tkind: KIND_CPU
}
parameters: {
\tkey: "NUM_STREAMS"
\tvalue: {
\t\tstring_value: "AUTO"
\t}
}
parameters: {
\tkey: "PERFORMANCE_HINT"
\tvalue: {
\t\tstring_value: "THROUGHPUT"
\t}
}
""",
        batching=True,
        scheduler="dynamic",
        instance_groups=1,
    ),
    # CRLF line endings throughout (the file came from a Windows workstation).
    Handwritten(
        name="yolov8n_onnx",
        text="""\
# YOLOv8n, exported with ultralytics 8.0.196, dynamic batch
name: "yolov8n_onnx"
backend: "onnxruntime"
max_batch_size: 16

input [
  {
    name: "images"
    data_type: TYPE_FP32
    dims: [ 3, 640, 640 ]
  }
]

output [
  {
    name: "output0"
    data_type: TYPE_FP32
    dims: [ 84, 8400 ]
  }
]

# Tuned on an A10: 8 is the knee of the latency curve.
dynamic_batching {
  preferred_batch_size: [ 8, 16 ]
  max_queue_delay_microseconds: 1000
}

instance_group [
  {
    count: 2
    kind: KIND_GPU
    gpus: [ 0 ]
  }
]
""".replace("\n", "\r\n"),
        batching=True,
        scheduler="dynamic",
        instance_groups=1,
    ),
    # No trailing newline at the end of the file.
    Handwritten(
        name="tokenizer_py",
        text="""\
name: "tokenizer_py"
backend: "python"
max_batch_size: 128
input [
  {
    name: "TEXT"
    data_type: TYPE_STRING
    dims: [ -1 ]
  }
]
output [
  {
    name: "input_ids"
    data_type: TYPE_INT64
    dims: [ -1 ]
  },
  {
    name: "attention_mask"
    data_type: TYPE_INT64
    dims: [ -1 ]
  }
]
dynamic_batching {
  preferred_batch_size: [ 32, 64, 128 ]
}
instance_group [ { count: 8, kind: KIND_CPU } ]
# the last line has no newline on purpose: vim's noeol setting""",
        batching=True,
        scheduler="dynamic",
        instance_groups=1,
    ),
    # Several blank lines between blocks and between fields.
    Handwritten(
        name="sentiment_onnx",
        text="""\


name: "sentiment_onnx"



platform: "onnxruntime_onnx"

max_batch_size: 32




input [
  {
    name: "input_ids"

    data_type: TYPE_INT64

    dims: [ -1 ]
  },


  {
    name: "attention_mask"
    data_type: TYPE_INT64
    dims: [ -1 ]
  }
]



output [
  {
    name: "logits"
    data_type: TYPE_FP32
    dims: [ 3 ]
  }
]




dynamic_batching {

  max_queue_delay_microseconds: 200

}



instance_group [ { kind: KIND_GPU } ]


""",
        batching=True,
        scheduler="dynamic",
        instance_groups=1,
    ),
    # Everything crammed on a few lines, with trailing whitespace on two of them.
    Handwritten(
        name="crammed_mlp",
        text=(
            'name: "crammed_mlp" platform: "onnxruntime_onnx" max_batch_size: 8   \n'
            'input [{name: "x" data_type: TYPE_FP32 dims: [16]}] '
            'output [{name: "y" data_type: TYPE_FP32 dims: [4]}]\n'
            "dynamic_batching {preferred_batch_size: [2,4,8] max_queue_delay_microseconds: 50} "
            "instance_group [{count: 2 kind: KIND_CPU}] \n"
        ),
        batching=True,
        scheduler="dynamic",
        instance_groups=1,
    ),
    # A stateful model with sequence_batching and an oldest-first strategy.
    Handwritten(
        name="streaming_asr",
        text="""\
# Streaming ASR (Conformer-CTC), one chunk of 160 ms per request.
# The client sets sequence_start / sequence_end; the backend keeps the
# encoder cache between chunks.
name: "streaming_asr"
backend: "onnxruntime"
max_batch_size: 16

input [
  {
    name: "audio_chunk"
    data_type: TYPE_FP32
    dims: [ 2560 ]
  },
  {
    name: "START"
    data_type: TYPE_INT32
    dims: [ 1 ]
  },
  {
    name: "READY"
    data_type: TYPE_INT32
    dims: [ 1 ]
  },
  {
    name: "END"
    data_type: TYPE_INT32
    dims: [ 1 ]
  },
  {
    name: "CORRID"
    data_type: TYPE_UINT64
    dims: [ 1 ]
  }
]
output [
  {
    name: "log_probs"
    data_type: TYPE_FP32
    dims: [ -1, 129 ]
  }
]

sequence_batching {
  max_sequence_idle_microseconds: 5000000  # 5 s, then the slot is freed
  oldest {
    max_candidate_sequences: 4
    preferred_batch_size: [ 2, 4 ]
    max_queue_delay_microseconds: 100
  }
  control_input [
    {
      name: "START"
      control [
        {
          kind: CONTROL_SEQUENCE_START
          int32_false_true: [ 0, 1 ]
        }
      ]
    },
    {
      name: "READY"
      control [
        {
          kind: CONTROL_SEQUENCE_READY
          int32_false_true: [ 0, 1 ]
        }
      ]
    },
    {
      name: "END"
      control [
        {
          kind: CONTROL_SEQUENCE_END
          int32_false_true: [ 0, 1 ]
        }
      ]
    },
    {
      name: "CORRID"
      control [
        {
          kind: CONTROL_SEQUENCE_CORRID
          data_type: TYPE_UINT64
        }
      ]
    }
  ]
}

instance_group [
  {
    count: 2
    kind: KIND_GPU
  }
]
""",
        batching=True,
        scheduler="oldest",
        instance_groups=1,
    ),
    # sequence_batching with the direct strategy, controls in repeated-block syntax.
    Handwritten(
        name="accumulator_seq",
        text="""\
name: "accumulator_seq"
backend: "python"
max_batch_size: 8
input {
  name: "INPUT"
  data_type: TYPE_INT32
  dims: [ 1 ]
}
input {
  name: "START"
  data_type: TYPE_BOOL
  dims: [ 1 ]
}
input {
  name: "READY"
  data_type: TYPE_BOOL
  dims: [ 1 ]
}
output {
  name: "OUTPUT"
  data_type: TYPE_INT32
  dims: [ 1 ]
}
sequence_batching {
  direct { }
  max_sequence_idle_microseconds: 1000000
  control_input {
    name: "START"
    control {
      kind: CONTROL_SEQUENCE_START
      bool_false_true: [ false, true ]
    }
  }
  control_input {
    name: "READY"
    control {
      kind: CONTROL_SEQUENCE_READY
      bool_false_true: [ false, true ]
    }
  }
}
# One slot per sequence in the batch: count * max_batch_size concurrent sequences.
instance_group [ { count: 1, kind: KIND_CPU } ]
""",
        batching=True,
        scheduler="direct",
        instance_groups=1,
    ),
    # An ensemble: preprocess -> classifier, with input_map / output_map per step.
    Handwritten(
        name="image_pipeline",
        text="""\
# Ensemble: raw JPEG bytes in, top-1 label out.
#   preprocess (python, CPU)  ->  resnet50_onnx (GPU)
name: "image_pipeline"
platform: "ensemble"
max_batch_size: 16
input [
  {
    name: "RAW_IMAGE"
    data_type: TYPE_UINT8
    dims: [ -1 ]
  }
]
output [
  {
    name: "CLASSIFICATION"
    data_type: TYPE_FP32
    dims: [ 1000 ]
  }
]
ensemble_scheduling {
  step [
    {
      model_name: "preprocess"
      model_version: -1
      input_map {
        key: "INPUT_0"
        value: "RAW_IMAGE"
      }
      output_map {
        key: "OUTPUT_0"
        value: "preprocessed_image"
      }
    },
    {
      model_name: "resnet50_onnx"
      model_version: -1  # latest
      input_map {
        key: "data"
        value: "preprocessed_image"
      }
      output_map {
        key: "resnetv17_dense0_fwd"
        value: "CLASSIFICATION"
      }
    }
  ]
}
""",
        batching=True,
        scheduler="ensemble",
        instance_groups=0,
    ),
    # `<` `>` message delimiters, as some older examples and generators write them.
    Handwritten(
        name="angle_brackets",
        text="""\
name: "angle_brackets"
platform: "onnxruntime_onnx"
max_batch_size: 8
input <
  name: "x"
  data_type: TYPE_FP32
  dims: [ 10 ]
>
output <
  name: "y"
  data_type: TYPE_FP32
  dims: [ 10 ]
>
dynamic_batching <
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 100
>
instance_group <
  count: 1
  kind: KIND_GPU
  gpus: [ 0 ]
>
optimization <
  cuda < graphs: true >
>
""",
        batching=True,
        scheduler="dynamic",
        instance_groups=1,
    ),
    # `:` before every message, JSON-ish.
    Handwritten(
        name="colon_messages",
        text="""\
name: "colon_messages"
backend: "onnxruntime"
max_batch_size: 8
input: [
  {
    name: "features"
    data_type: TYPE_FP32
    dims: [ 128 ]
  }
]
output: [
  {
    name: "embedding"
    data_type: TYPE_FP32
    dims: [ 64 ]
  }
]
dynamic_batching: {
  preferred_batch_size: [ 8 ]
  max_queue_delay_microseconds: 300
}
instance_group: [
  {
    count: 1
    kind: KIND_GPU
  }
]
optimization: {
  graph: { level: 1 }
}
""",
        batching=True,
        scheduler="dynamic",
        instance_groups=1,
    ),
    # `,` and `;` separators after fields.
    Handwritten(
        name="separators",
        text="""\
name: "separators",
backend: "python";
max_batch_size: 16,

input [
  {
    name: "A",
    data_type: TYPE_FP32,
    dims: [ 4 ],
  },
  {
    name: "B";
    data_type: TYPE_FP32;
    dims: [ 4 ];
  }
];
output [
  {
    name: "SUM", data_type: TYPE_FP32, dims: [ 4 ]
  }
],

dynamic_batching {
  preferred_batch_size: [ 4, 8, 16 ];
  max_queue_delay_microseconds: 100;
};

instance_group [
  { count: 2, kind: KIND_CPU; }
];
""",
        batching=True,
        scheduler="dynamic",
        instance_groups=1,
    ),
    # No `name:` (Triton takes it from the directory), python backend with dynamic batching.
    Handwritten(
        name="unnamed_python",
        text="""\
# name comes from the directory: models/unnamed_python/config.pbtxt
backend: "python"
max_batch_size: 8

input [
  {
    name: "IN"
    data_type: TYPE_FP32
    dims: [ -1 ]
  }
]
output [
  {
    name: "OUT"
    data_type: TYPE_FP32
    dims: [ -1 ]
  }
]

dynamic_batching {
  preferred_batch_size: 4
  preferred_batch_size: 8
}
""",
        batching=True,
        scheduler="dynamic",
        instance_groups=0,
    ),
    # No `name:` and no max_batch_size at all (Triton reads it as 0).
    Handwritten(
        name="unnamed_no_batch",
        text="""\
# Legacy model, exported with a fixed batch of 1. Do not add max_batch_size.
platform: "onnxruntime_onnx"
input [
  {
    name: "input"
    data_type: TYPE_FP32
    dims: [ 1, 3, 32, 32 ]
  }
]
output [
  {
    name: "output"
    data_type: TYPE_FP32
    dims: [ 1, 10 ]
  }
]
""",
        batching=False,
        scheduler="none",
        instance_groups=0,
    ),
    # dynamic_batching with ordering, priorities and queue policies.
    Handwritten(
        name="ranker_priority",
        text="""\
name: "ranker_priority"
platform: "onnxruntime_onnx"
max_batch_size: 64

input [
  {
    name: "query_doc_features"
    data_type: TYPE_FP16
    dims: [ 256 ]
  }
]
output [
  {
    name: "score"
    data_type: TYPE_FP16
    dims: [ 1 ]
  }
]

# Level 1 is interactive search, level 2 is the nightly re-rank batch job.
dynamic_batching {
  preferred_batch_size: [ 16, 32, 64 ]
  max_queue_delay_microseconds: 500
  priority_levels: 2
  default_priority_level: 2
  default_queue_policy {
    timeout_action: DELAY
    default_timeout_microseconds: 100000
    allow_timeout_override: true
    max_queue_size: 1024
  }
  priority_queue_policy {
    key: 1
    value: {
      timeout_action: REJECT
      default_timeout_microseconds: 20000
      max_queue_size: 256
    }
  }
}

instance_group [
  {
    count: 2
    kind: KIND_GPU
  }
]
response_cache { enable: true }  # identical queries are common
""",
        batching=True,
        scheduler="dynamic",
        instance_groups=1,
    ),
    # TensorRT plan with model_warmup (zero, random and file data) and CUDA graphs.
    Handwritten(
        name="efficientnet_trt",
        text="""\
name: "efficientnet_trt"
platform: "tensorrt_plan"
max_batch_size: 8
input [
  {
    name: "input"
    data_type: TYPE_FP16
    dims: [ 3, 300, 300 ]
  },
  {
    name: "scale"
    data_type: TYPE_FP32
    dims: [ 1 ]
  }
]
output [
  {
    name: "probs"
    data_type: TYPE_FP16
    dims: [ 1000 ]
  }
]
dynamic_batching { }
optimization {
  cuda {
    graphs: true
    # busy_wait_events: true
  }
}
# Warm up both the batch-1 and the batch-8 CUDA graphs before READY.
model_warmup [
  {
    name: "batch1_zeros"
    batch_size: 1
    inputs {
      key: "input"
      value: {
        data_type: TYPE_FP16
        dims: [ 3, 300, 300 ]
        zero_data: true
      }
    }
    inputs {
      key: "scale"
      value: {
        data_type: TYPE_FP32
        dims: [ 1 ]
        input_data_file: "scale_one.bin"
      }
    }
  },
  {
    name: "batch8_random"
    batch_size: 8
    count: 3
    inputs {
      key: "input"
      value: {
        data_type: TYPE_FP16
        dims: [ 3, 300, 300 ]
        random_data: true
      }
    }
    inputs {
      key: "scale"
      value: {
        data_type: TYPE_FP32
        dims: [ 1 ]
        random_data: true
      }
    }
  }
]
""",
        batching=True,
        scheduler="dynamic",
        instance_groups=0,
    ),
    # version_policy (specific), response_cache and parameters with plain values.
    Handwritten(
        name="fraud_scorer",
        text="""\
name: "fraud_scorer"
backend: "onnxruntime"
default_model_filename: "scorer.onnx"

# v1 is the control, v3 the challenger; v2 was rolled back (INC-2291).
version_policy: { specific: { versions: [ 1, 3 ] } }

max_batch_size: 256
input [
  {
    name: "features"
    data_type: TYPE_FP32
    dims: [ 48 ]
  }
]
output [
  {
    name: "probability"
    data_type: TYPE_FP32
    dims: [ 1 ]
  }
]
dynamic_batching {
  preferred_batch_size: [ 64, 128, 256 ]
  max_queue_delay_microseconds: 250
}
instance_group [ { count: 4 kind: KIND_CPU } ]
response_cache {
  enable: true
}
parameters { key: "intra_op_thread_count" value: { string_value: "2" } }
parameters { key: "inter_op_thread_count" value: { string_value: "1" } }
""",
        batching=True,
        scheduler="dynamic",
        instance_groups=1,
    ),
    # Repeated `dims: 3` lines and repeated `preferred_batch_size` lines.
    Handwritten(
        name="repeated_scalars",
        text="""\
name: "repeated_scalars"
platform: "onnxruntime_onnx"
max_batch_size: 16
input {
  name: "pixels"
  data_type: TYPE_UINT8
  dims: 3
  dims: 128
  dims: 128
}
output {
  name: "mask"
  data_type: TYPE_UINT8
  dims: 128
  dims: 128
}
dynamic_batching {
  preferred_batch_size: 4
  preferred_batch_size: 8   # the GPU is saturated from 8
  preferred_batch_size: 16
  max_queue_delay_microseconds: 100
}
instance_group {
  count: 1
  kind: KIND_GPU
}
""",
        batching=True,
        scheduler="dynamic",
        instance_groups=1,
    ),
    # Compact `[4,8,16]` lists without spaces, graph level and pinned memory settings.
    Handwritten(
        name="compact_lists",
        text="""\
name: "compact_lists"
platform: "onnxruntime_onnx"
max_batch_size: 16
input [{
  name: "x"
  data_type: TYPE_FP32
  dims: [-1,80]
}]
output [{
  name: "y"
  data_type: TYPE_FP32
  dims: [-1,256]
}]
dynamic_batching {
  preferred_batch_size: [4,8,16]
  max_queue_delay_microseconds: 400
}
instance_group [{count:1,kind:KIND_GPU,gpus:[0]}]
optimization {
  graph { level: -1 }  # disable ORT graph optimisations, they break the attention fusion
  input_pinned_memory { enable: false }
  output_pinned_memory { enable: true }
}
""",
        batching=True,
        scheduler="dynamic",
        instance_groups=1,
    ),
    # ONNX Runtime with an OpenVINO CPU accelerator, version_policy latest and a decoupled
    # transaction policy (not modelled by tritongen, kept as it is).
    Handwritten(
        name="cpu_openvino_ep",
        text="""\
name: "cpu_openvino_ep"
backend: "onnxruntime"
max_batch_size: 32
version_policy: { latest: { num_versions: 2 } }
input [
  {
    name: "tokens"
    data_type: TYPE_INT64
    dims: [ -1 ]
    allow_ragged_batch: true
  }
]
output [
  {
    name: "pooled"
    data_type: TYPE_FP32
    dims: [ 384 ]
  }
]
dynamic_batching {
  preferred_batch_size: [ 8, 16, 32 ]
}
instance_group [
  {
    name: "cpu_pool"
    count: 2
    kind: KIND_CPU
  }
]
optimization { execution_accelerators {
  cpu_execution_accelerator : [ {
    name : "openvino"
  } ]
}}
model_transaction_policy {
  decoupled: false
}
""",
        batching=True,
        scheduler="dynamic",
        instance_groups=1,
    ),
    # max_batch_size 0, decoupled python model with a KIND_MODEL instance group.
    Handwritten(
        name="llm_stream_py",
        text="""\
# Streams tokens back one response at a time (decoupled). The backend
# batches internally, so Triton must not: max_batch_size is 0.
name: "llm_stream_py"
backend: "python"
max_batch_size: 0

model_transaction_policy {
  decoupled: true
}

input [
  {
    name: "prompt"
    data_type: TYPE_STRING
    dims: [ 1 ]
  },
  {
    name: "max_tokens"
    data_type: TYPE_INT32
    dims: [ 1 ]
    optional: true
  }
]
output [
  {
    name: "text_output"
    data_type: TYPE_STRING
    dims: [ -1 ]
  }
]

instance_group [
  {
    count: 1
    kind: KIND_MODEL
  }
]

parameters: {
  key: "EXECUTION_ENV_PATH",
  value: {string_value: "$$TRITON_MODEL_DIRECTORY/llm_env.tar.gz"}
}
parameters: {
  key: "engine_args"
  value: {string_value: "{\\"tensor_parallel_size\\": 1, \\"dtype\\": \\"bfloat16\\"}"}
}
""",
        batching=False,
        scheduler="none",
        instance_groups=1,
    ),
    # Comments everywhere: inside lists, after braces, with no space before `#`.
    Handwritten(
        name="commented_everywhere",
        text="""\
name: "commented_everywhere" # must match the directory name
platform: "pytorch_libtorch"#no space before the hash
max_batch_size: 8 # keep small
# max_batch_size: 64  (old value, OOM on the L4)

input [ # opening a list
  { # first tensor
    name: "INPUT__0"
    data_type: TYPE_FP32
    dims: [
      3,   # channels
      -1,  # height, dynamic
      -1   # width, dynamic
    ]
  } # end of first tensor
] # end of inputs
output [
  {
    name: "OUTPUT__0"
    data_type: TYPE_FP32
    dims: [ 21, -1, -1 ]  # VOC classes
    label_filename: "voc#labels {2012}.txt"
  }
]
#dynamic_batching {
#  max_queue_delay_microseconds: 100
#}
dynamic_batching {
  preferred_batch_size: [ 2, 4 ] # , 8 ]
  # max_queue_delay_microseconds: 100
  max_queue_delay_microseconds: 50  # halved after load test 2023-11-02
}
# instance_group [ { count: 2 kind: KIND_GPU } ]
""",
        batching=True,
        scheduler="dynamic",
        instance_groups=0,
    ),
    # A mix of list and block syntax in one file, with three instance groups and parameters
    # whose values look like protobuf text.
    Handwritten(
        name="mixed_syntax",
        text=r"""name: "mixed_syntax"
backend: "onnxruntime"
max_batch_size: 24
input [
  { name: "a" data_type: TYPE_INT32 dims: [ 1 ] },
  { name: "b" data_type: TYPE_INT32 dims: [ 1 ] }
]
input { name: "c" data_type: TYPE_FP32 dims: [ 2, 2 ] }
output { name: "out" data_type: TYPE_FP32 dims: [ 2, 2 ] }
dynamic_batching { preferred_batch_size: [ 8, 24 ] max_queue_delay_microseconds: 100 }
instance_group [
  { name: "gpu0" kind: KIND_GPU count: 1 gpus: [ 0 ] },
  { name: "gpu1" kind: KIND_GPU count: 1 gpus: [ 1 ] }
]
instance_group { name: "cpu_fallback" kind: KIND_CPU count: 1 }
parameters {
  key: "note"
  value: { string_value: "instance_group [ { count: 9 } ] # not real" }
}
parameters {
  key: "quoted"
  value: { string_value: 'single \'quoted\' with \"double\" inside' }
}
""",
        batching=True,
        scheduler="dynamic",
        instance_groups=3,
    ),
    Handwritten(
        name="densenet_nchw",
        text="""# DenseNet from the ONNX model zoo, as in Triton's quickstart.
name: "densenet_nchw"
platform: "onnxruntime_onnx"
max_batch_size : 0
input [
  {
    name: "data_0"
    data_type: TYPE_FP32
    format: FORMAT_NCHW  # tritongen does not model input formats
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
        batching=False,
        scheduler="none",
        instance_groups=0,
    ),
    Handwritten(
        name="rate_limited",
        text="""name: "rate_limited"
backend: "onnxruntime"
max_batch_size: 32
input { name: "pixels" data_type: TYPE_UINT8 format: FORMAT_NHWC dims: [ 224, 224, 3 ] }
output { name: "probs" data_type: TYPE_FP32 dims: [ 1000 ] }
dynamic_batching {
  preferred_batch_size: [ 8, 16 ]
  max_queue_delay_microseconds: 2000
}
# Two copies share the GPU with the detector: each holds one of the 4 "R1" units.
instance_group [
  {
    count: 2
    kind: KIND_GPU
    rate_limiter {
      resources [ { name: "R1" count: 1 } ]
      priority: 2
    }
  }
]
optimization { eager_batching: true }
""",
        batching=True,
        scheduler="dynamic",
        instance_groups=1,
    ),
)
