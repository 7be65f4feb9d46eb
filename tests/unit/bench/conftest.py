import sys
from pathlib import Path

# The benchmarks' package sits at the repository's top, beside sluice.
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
