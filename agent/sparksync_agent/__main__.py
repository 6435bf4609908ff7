import sys

from sparksync_agent.cli import main

sys.exit(main())
