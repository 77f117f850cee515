from postflightd.cli import main

raise SystemExit(main())
