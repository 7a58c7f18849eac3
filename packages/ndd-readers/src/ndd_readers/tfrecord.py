"""``ndd.tfrecord``: feature descriptors for ``ndd.readers.TFRecord``, and writers.

``FixedLenFeature(shape, dtype, default_value)`` and ``VarLenFeature(dtype,
default_value)`` with the dtypes ``int64``, ``float32`` and ``string``, as in
``nvidia.dali.tfrecord``.  ``write_tfrecord``, ``encode_example``, ``build_index`` and
``write_index`` write datasets (and their index files) without TensorFlow.
"""

from ._tfrecord import (
    Feature,
    FeatureType,
    FixedLenFeature,
    VarLenFeature,
    build_index,
    encode_example,
    float32,
    int64,
    string,
    write_index,
    write_tfrecord,
)

__all__ = ["Feature", "FeatureType", "FixedLenFeature", "VarLenFeature", "build_index", "encode_example",
           "float32", "int64", "string", "write_index", "write_tfrecord"]
