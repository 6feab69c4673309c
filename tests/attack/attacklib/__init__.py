"""attack.py's hostile clients and the driver that measures the damage.

The modules import h2wire (tests/attack/h2wire.py) as a top-level module:
attack.py puts its own folder on sys.path first.
"""

