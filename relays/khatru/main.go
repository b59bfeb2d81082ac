// A minimal relay on khatru, for sluice's benchmark and the tests that run in front of a
// third-party relay: khatru's own pipeline (id and signature checked on every EVENT, NIP-11,
// NIP-42) over the eventstore's badger backend (pure Go: no cgo, so `go build` is all it
// needs), bound to 127.0.0.1 on the port given, its database in the directory given.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/dgraph-io/badger/v4"
	badgerstore "github.com/fiatjaf/eventstore/badger"
	"github.com/fiatjaf/khatru"
)

func main() {
	port := flag.Int("port", 0, "port to listen on, on 127.0.0.1 (required)")
	dataDir := flag.String("data-dir", "", "directory of the badger database (required)")
	auth := flag.Bool("auth", false, "NIP-42: send every connection a challenge when it opens")
	serviceURL := flag.String("service-url", "",
		"the relay's public URL, which AUTH events must name (default: the request's Host)")
	flag.Parse()
	if *port <= 0 || *dataDir == "" {
		flag.Usage()
		os.Exit(2)
	}

	db := &badgerstore.BadgerBackend{
		Path: *dataDir,
		// Badger's logger prints every compaction at INFO: warnings only, like the other relays.
		BadgerOptionsModifier: func(o badger.Options) badger.Options {
			return o.WithLoggingLevel(badger.WARNING)
		},
	}
	if err := db.Init(); err != nil {
		log.Fatalf("opening %s: %v", *dataDir, err)
	}
	defer db.Close()

	relay := khatru.NewRelay()
	relay.Info.Name = "sluice khatru relay"
	relay.Info.Description = "khatru with the badger eventstore, for sluice's tests and benchmark"
	relay.ServiceURL = *serviceURL
	relay.StoreEvent = append(relay.StoreEvent, db.SaveEvent)
	relay.QueryEvents = append(relay.QueryEvents, db.QueryEvents)
	relay.CountEvents = append(relay.CountEvents, db.CountEvents)
	relay.DeleteEvent = append(relay.DeleteEvent, db.DeleteEvent)
	relay.ReplaceEvent = append(relay.ReplaceEvent, db.ReplaceEvent)
	if *auth {
		// khatru sends a challenge only when a policy answers auth-required: this relay asks
		// on connect, as nostr-rs-relay does with NIP-42 on.
		relay.OnConnect = append(relay.OnConnect, khatru.RequestAuth)
	}
	// A plain page on / (khatru's mux has none): what a health check on the root expects.
	relay.Router().HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "khatru relay: connect with a Nostr client")
	})

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- relay.Start("127.0.0.1", *port) }()
	select {
	case err := <-done:
		log.Fatalf("listening on 127.0.0.1:%d: %v", *port, err)
	case <-stop:
		relay.Shutdown(context.Background())
	}
}
