from doctor.cli.main import main

raise SystemExit(main())
