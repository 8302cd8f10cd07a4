import multiprocessing
import sys

from app.cli import main

# A bundled app (packaging/) starts its speech processes (app/api/speech_processes.py)
# through its own executable: this makes such a start run the process, not the app.
multiprocessing.freeze_support()
sys.exit(main())
