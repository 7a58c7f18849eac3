"""Entry point of the readers (group ``ndd.readers``)."""

from __future__ import annotations

from ndd.plugins import Registry


def register(reg: Registry) -> None:
    """Publish this package's reader classes under ``ndd.readers``."""
    from ._caffe import Caffe
    from ._caffe2_reader import Caffe2
    from ._coco import COCO
    from ._file import File
    from ._fits import Fits
    from ._mxnet import MXNet
    from ._nemo_asr import NemoAsr
    from ._numpy_reader import Numpy
    from ._tfrecord_reader import TFRecord
    from ._video_legacy import Video as LegacyVideo
    from ._video_legacy import VideoResize
    from ._video_reader import Video
    from ._webdataset import Webdataset
    from .distributed import shard_args

    reg.add_reader("File", File)
    reg.add_reader("Caffe", Caffe)
    reg.add_reader("Caffe2", Caffe2)
    reg.add_reader("TFRecord", TFRecord)
    reg.add_reader("COCO", COCO)
    reg.add_reader("Numpy", Numpy)
    reg.add_reader("MXNet", MXNet)
    reg.add_reader("Webdataset", Webdataset)
    reg.add_reader("NemoAsr", NemoAsr)
    reg.add_reader("shard_args", shard_args)  # ours: a helper function, not a reader class
    reg.add_reader("experimental.Fits", Fits)  # ndd.experimental.readers.Fits
    reg.add_reader("experimental.Video", Video)  # ndd.experimental.readers.Video
    reg.add_reader("Video", LegacyVideo)
    reg.add_reader("VideoResize", VideoResize)
