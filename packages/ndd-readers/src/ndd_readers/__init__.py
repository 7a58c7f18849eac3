"""ndd-readers: stateful readers (File, Caffe2, TFRecord, COCO, Numpy) for ndd."""
