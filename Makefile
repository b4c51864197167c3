# Shortcuts for scripts/lab, which does the real work (and runs where make is absent).
.PHONY: setup run test test-fast bench check plan
setup:
	scripts/lab setup
run:
	scripts/lab run $(ARGS)
test:
	scripts/lab test $(ARGS)
test-fast:
	scripts/lab test -m "not privileged" $(ARGS)
bench:
	scripts/lab bench $(ARGS)
check:
	scripts/lab check $(FABRIC)
plan:
	scripts/lab plan $(ARGS)
