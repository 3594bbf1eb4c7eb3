from doctor.main import main

raise SystemExit(main())
