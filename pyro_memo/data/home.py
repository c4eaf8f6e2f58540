"""The one folder where downloaded datasets are kept, after scikit-learn's ``get_data_home``.

Every ``fetch_*`` function of :mod:`pyro_memo.data` caches its files under
:func:`get_data_home`: the ``data_home`` argument if given, else the ``PYRO_MEMO_DATA``
environment variable, else ``~/pyro_memo_data``. Loaders (``load_*``) only read that cache; only
``fetch_*`` functions download.
"""

import os

#: environment variable naming the data folder
DATA_HOME_ENV = "PYRO_MEMO_DATA"

#: the data folder when neither ``data_home`` nor ``PYRO_MEMO_DATA`` is given
DEFAULT_DATA_HOME = os.path.join("~", "pyro_memo_data")


class DataUnavailableError(OSError):
    """A dataset is not in the data folder and could not (or was not allowed to) be downloaded."""


def get_data_home(data_home=None):
    """The data folder (created if missing), with ``~`` and environment variables expanded.

    :param data_home: a folder; default ``$PYRO_MEMO_DATA``, else ``~/pyro_memo_data``.
    :returns: the folder's path as a string.
    """
    if data_home is None:
        data_home = os.environ.get(DATA_HOME_ENV) or DEFAULT_DATA_HOME
    data_home = os.path.expandvars(os.path.expanduser(os.fspath(data_home)))
    os.makedirs(data_home, exist_ok=True)
    return data_home
