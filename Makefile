GO ?= go
BIN := bin/dractl

.PHONY: all build test demo fmt-check vet fuzz-short

all: build

build:
	$(GO) build -o $(BIN) ./cmd/dractl

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

test: fmt-check vet
	$(GO) test -race -count=1 ./...
