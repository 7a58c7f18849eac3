"""ndd.readers.NemoAsr on generated WAV files and NeMo manifests (references: the samples
written, the documented crop and filter rules, and a sine sampled at the target rate)."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

import ndd


def write_wav(path, x: np.ndarray, rate: int) -> None:
    """16-bit PCM WAV of ``x`` (frames, channels)."""
    data = x.astype("<i2").tobytes()
    ch = x.shape[1]
    fmt = struct.pack("<HHIIHH", 1, ch, rate, rate * 2 * ch, 2 * ch, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", len(data)) + data
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)


def write_manifest(path, entries: list) -> str:
    path.write_text("".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in entries))
    return str(path)


@pytest.fixture
def data(tmp_path):
    """Three files (mono 1 kHz ramp, stereo 8 kHz, mono 16 kHz) and their samples."""
    rng = np.random.default_rng(0)
    ramp = np.arange(2000, dtype=np.int16).reshape(-1, 1)
    stereo = rng.integers(-30000, 30000, (800, 2)).astype(np.int16)
    mono = rng.integers(-30000, 30000, (1600, 1)).astype(np.int16)
    files = {}
    for name, x, rate in (("ramp", ramp, 1000), ("stereo", stereo, 8000), ("mono", mono, 16000)):
        p = tmp_path / f"{name}.wav"
        write_wav(p, x, rate)
        files[name] = (str(p), x, rate)
    return tmp_path, files


def samples(reader, batch_size=None):
    out = []
    if batch_size is None:
        for s in reader.next_epoch():
            out.append([np.asarray(t) for t in s])
    else:
        for b in reader.next_epoch(batch_size=batch_size):
            out.extend(zip(*[[np.asarray(t) for t in o] for o in b]))
    return out


def test_outputs_order_dtypes_and_crop(data):
    tmp, f = data
    m = write_manifest(tmp / "m.json", [
        {"audio_filepath": f["ramp"][0], "duration": 2.0, "text": "héllo"},
        {"audio_filepath": f["ramp"][0], "offset": 0.0123, "duration": 0.0456, "text": "crop"},
        {"audio_filepath": f["ramp"][0], "offset": 1.9, "duration": 0.5},  # cut at the end of the file
        {"audio_filepath": f["ramp"][0], "offset": 0.5},  # to the end
        {"audio_filepath": f["ramp"][0], "offset": -1.0, "duration": 0.0},  # explicit 0 s: empty
    ])
    out = samples(ndd.readers.NemoAsr(manifest_filepaths=[m], read_idxs=True, dtype=ndd.int16))
    ramp = np.arange(2000, dtype=np.int16)
    expected = [ramp, ramp[12:12 + 45], ramp[1900:], ramp[500:], ramp[:0]]
    for (audio, rate, text, idx), want, k in zip(out, expected, range(5)):
        np.testing.assert_array_equal(audio, want)
        assert audio.dtype == np.int16 and rate.dtype == np.float32 and rate.shape == () and rate == 1000
        assert text.dtype == np.uint8 and idx.dtype == np.int64 and idx.tolist() == [k]
    assert bytes(out[0][2]) == "héllo".encode() and bytes(out[1][2]) == b"crop" and out[2][2].shape == (0,)


def test_float_values_downmix_and_optional_outputs(data):
    tmp, f = data
    m = write_manifest(tmp / "m.json", [{"audio_filepath": f["stereo"][0]}, {"audio_filepath": f["mono"][0]}])
    x = f["stereo"][1].astype(np.float64) / 32768
    (a0, r0), (a1, r1) = samples(ndd.readers.NemoAsr(manifest_filepaths=m, read_text=False))
    np.testing.assert_allclose(a0, x.mean(axis=1), rtol=0, atol=1e-7)
    np.testing.assert_array_equal(a1, (f["mono"][1][:, 0] / 32768).astype(np.float32))
    assert (float(r0), float(r1)) == (8000, 16000)
    (b0,), (b1,) = samples(ndd.readers.NemoAsr(manifest_filepaths=m, downmix=False, read_text=False,
                                               read_sample_rate=False, dtype="int32"))
    np.testing.assert_array_equal(b0, f["stereo"][1].astype(np.int32) << 16)
    assert b0.shape == (800, 2) and b1.shape == (1600, 1)


def test_resampling_keeps_the_files_rate(data, tmp_path):
    t = np.arange(4000) / 8000
    write_wav(tmp_path / "sine.wav", np.round(16000 * np.sin(2 * np.pi * 200 * t)).reshape(-1, 1), 8000)
    m = write_manifest(tmp_path / "s.json", [{"audio_filepath": str(tmp_path / "sine.wav"), "offset": 0.1}])
    (audio, rate, _), = samples(ndd.readers.NemoAsr(manifest_filepaths=m, sample_rate=12000))
    assert rate == 8000  # the source's rate, as DALI reports it
    assert audio.shape == (int(np.ceil(3200 * 12000 / 8000)),)  # the 3200 frames after the offset
    want = 16000 / 32768 * np.sin(2 * np.pi * 200 * (0.1 + np.arange(len(audio)) / 12000))
    np.testing.assert_allclose(audio[100:-100], want[100:-100], atol=2e-3)


def test_duration_filters_and_indices_per_manifest(data):
    tmp, f = data
    p = f["ramp"][0]
    m0 = write_manifest(tmp / "a.json", [{"audio_filepath": p, "duration": d, "text": f"a{d}"}
                                         for d in (0.1, 0.2, 0.25, 0.5)])
    m1 = write_manifest(tmp / "b.json", ["", {"audio_filepath": p, "text": "nodur"},
                                         {"audio_filepath": p, "duration": 0.3, "text": "b0.3"}])

    def texts(**kw):
        r = ndd.readers.NemoAsr(manifest_filepaths=[m0, m1], read_idxs=True, read_sample_rate=False, **kw)
        return [(bytes(t).decode(), int(i[0])) for _, t, i in samples(r)]

    assert texts() == [("a0.1", 0), ("a0.2", 1), ("a0.25", 2), ("a0.5", 3), ("nodur", 0), ("b0.3", 1)]
    # float32(0.2) > 0.2: dropped by min_duration=0.2, kept by max_duration=0.2; no duration counts as 0
    assert texts(min_duration=0.2) == [("a0.25", 0), ("a0.5", 1), ("b0.3", 0)]
    assert texts(max_duration=0.2) == [("a0.1", 0), ("a0.2", 1), ("nodur", 0)]
    assert texts(min_duration=0.25, max_duration=0.3) == [("a0.25", 0), ("b0.3", 0)]
    with pytest.raises(ValueError, match="duration filters"):
        ndd.readers.NemoAsr(manifest_filepaths=[m0], min_duration=5.0)


def test_sharding_padding_and_batches(data):
    tmp, f = data
    m = write_manifest(tmp / "m.json", [{"audio_filepath": f["ramp"][0], "duration": 0.001 * (k + 1),
                                         "text": str(k)} for k in range(10)])
    r = ndd.readers.NemoAsr(manifest_filepaths=m, num_shards=3, shard_id=1, pad_last_batch=True)
    assert r.get_metadata() == {"epoch_size": 10, "epoch_size_padded": 12, "number_of_shards": 3,
                                "shard_id": 1, "pad_last_batch": True, "stick_to_shard": False}
    got = [bytes(t).decode() for _, _, t in samples(r, batch_size=3)]
    assert got == ["3", "4", "5", "5", "5", "5"]  # shard 1 holds [3, 6), padded to 4, two batches of 3
    lengths = [a.shape[0] for a, _, _ in samples(ndd.readers.NemoAsr(manifest_filepaths=m), batch_size=4)]
    assert lengths[:10] == list(range(1, 11))


def test_shuffle_is_a_permutation(data):
    tmp, f = data
    m = write_manifest(tmp / "m.json", [{"audio_filepath": f["ramp"][0], "text": str(k)} for k in range(12)])
    r = ndd.readers.NemoAsr(manifest_filepaths=m, random_shuffle=True, seed=3, read_sample_rate=False)
    order = [int(bytes(t)) for _, t in samples(r)]
    assert sorted(order) == list(range(12)) and order != list(range(12))


def test_normalize_text_is_deprecated(data):
    tmp, f = data
    m = write_manifest(tmp / "m.json", [{"audio_filepath": f["ramp"][0]}])
    with pytest.warns(DeprecationWarning, match="normalize_text"):
        ndd.readers.NemoAsr(manifest_filepaths=m, normalize_text=True)


@pytest.mark.parametrize("line, message", [
    ("not json", r"m\.json:2: not a JSON object"),
    ("[1, 2]", r"m\.json:2: expected a JSON object"),
    ('{"text": "x"}', r"m\.json:2: missing the `audio_filepath`"),
    ('{"audio_filepath": "/nonexistent/a.wav"}', r"m\.json:2: audio file '/nonexistent/a.wav' does not exist"),
    ('{"audio_filepath": "AUDIO", "text": 5}', r"m\.json:2: `text` must be a string"),
    ('{"audio_filepath": "AUDIO", "duration": "1"}', r"m\.json:2: `duration` must be a number"),
])
def test_bad_manifest_lines(data, line, message):
    tmp, f = data
    good = json.dumps({"audio_filepath": f["ramp"][0]})
    m = write_manifest(tmp / "m.json", [good, line.replace("AUDIO", f["ramp"][0])])
    with pytest.raises(ValueError, match=message):
        ndd.readers.NemoAsr(manifest_filepaths=m)


def test_bad_audio_and_arguments(data):
    tmp, f = data
    (tmp / "bad.wav").write_bytes(b"not a wav file at all")
    m = write_manifest(tmp / "m.json", [{"audio_filepath": str(tmp / "bad.wav")},
                                        {"audio_filepath": f["ramp"][0], "offset": 3.0}])
    r = ndd.readers.NemoAsr(manifest_filepaths=m)
    with pytest.raises(ValueError, match=r"m\.json:1 .*bad\.wav.*cannot decode"):
        r(batch_size=1)
    r = ndd.readers.NemoAsr(manifest_filepaths=m, num_shards=2, shard_id=1)
    with pytest.raises(ValueError, match=r"m\.json:2 .*past the end"):
        r(batch_size=1)
    with pytest.raises(ValueError, match="dtype"):
        ndd.readers.NemoAsr(manifest_filepaths=m, dtype=ndd.uint8)
    with pytest.raises(ValueError, match="cannot be read"):
        ndd.readers.NemoAsr(manifest_filepaths=str(tmp / "missing.json"))
    lazy = ndd.readers.NemoAsr(manifest_filepaths=str(tmp / "missing.json"), lazy_init=True)
    with pytest.raises(ValueError, match="cannot be read"):
        lazy.get_metadata()
