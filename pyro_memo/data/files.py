"""Writing files safely: a crash while writing never leaves a half-written file under the final name."""

import os


def write_atomically(path, write):
    """Call ``write(tmp_path)``, then rename over ``path``: a crash leaves the old file intact."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
