"""The prepared GPU check: ``gpu_check.sh`` (the one command on a lent GPU) runs ``command``, whose body is
``run``; ``phase`` holds what both share and ``env`` what the check needs of the machine."""
