"""Reading what hang-diagnosis tools and hung jobs print: who did not join a collective."""
