// dlock-bench's Go peer: redsync (github.com/go-redsync/redsync/v4 on
// go-redis v9), the most used Go Redis lock, on the same redis-server as
// dlock's run. Built by scripts/setup (go build, from the module proxy).
//
//	redsync-peer PORT WORKLOAD SECONDS
//	  W1  one goroutine, lock + unlock pairs over 32 names in turn
//	  W2  16 goroutines at once, each over 32 names of its own (one client:
//	      go-redis's pool gives each a connection)
//	  W6  16 goroutines take turns on one mutex (1 ms holds, 1 ms outside),
//	      as dlock-bench's W6 does on its fair lock; redsync's Lock retries
//	      after its default delay (50-250 ms, 32 tries: a waiter that runs
//	      out of tries asks again)
//
// Prints one JSON line, as bench/peers/peers.js does: {"peer", "version",
// "workload", "pairs_per_s", "pairs_total", "lock_p50_us", "lock_p99_us",
// "cdf_us"}, and for W6 "handoff_p50_us" and "handoff_cdf_us".
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
)

const lease = 30 * time.Second

// the percentiles of "cdf_us" (dlock-bench --plot's curves)
var cdfAt = []float64{1, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65,
	70, 75, 80, 85, 90, 95, 99}

func pct(v []int64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]int64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)) * p / 100)
	if i >= len(s) {
		i = len(s) - 1
	}
	return float64(s[i])
}

func cdf(v []int64) []float64 {
	out := make([]float64, len(cdfAt))
	for i, p := range cdfAt {
		out[i] = pct(v, p)
	}
	return out
}

// pairs: tasks goroutines, each over 32 names of its own; the first one's
// lock latencies (us).
func pairs(rs *redsync.Redsync, tasks int, d time.Duration) (float64, int64, []int64) {
	var stop atomic.Bool
	var total atomic.Int64
	var lat []int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := 0; i < tasks; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ms := make([]*redsync.Mutex, 32)
			for k := range ms {
				ms[k] = rs.NewMutex(fmt.Sprintf("bench:go:%d:%d", i, k),
					redsync.WithExpiry(lease), redsync.WithTries(1))
			}
			n := int64(0)
			for !stop.Load() {
				m := ms[n%32]
				s := time.Now()
				if err := m.Lock(); err != nil {
					panic(err)
				}
				if i == 0 {
					lat = append(lat, time.Since(s).Microseconds())
				}
				if _, err := m.Unlock(); err != nil {
					panic(err)
				}
				n++
			}
			total.Add(n)
		}(i)
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	return float64(total.Load()) / time.Since(t0).Seconds(), total.Load(), lat
}

// handoffs: 16 goroutines take turns on one mutex; every grant's wait, and
// the hand-offs (a grant after the release its waiter waited for).
func handoffs(rs *redsync.Redsync, d time.Duration) (float64, int64, []int64, []int64) {
	var stop atomic.Bool
	var mu sync.Mutex
	var released time.Time
	var grants, hand []int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := rs.NewMutex("bench:go:w6", redsync.WithExpiry(lease))
			for !stop.Load() {
				call := time.Now()
				if err := m.Lock(); err != nil {
					continue // out of tries: ask again
				}
				got := time.Now()
				mu.Lock()
				grants = append(grants, got.Sub(call).Microseconds())
				if released.After(call) {
					hand = append(hand, got.Sub(released).Microseconds())
				}
				mu.Unlock()
				for end := time.Now().Add(time.Millisecond); time.Now().Before(end); {
				} // hold 1 ms
				m.Unlock()
				mu.Lock()
				released = time.Now()
				mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		}()
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	return float64(len(grants)) / time.Since(t0).Seconds(), int64(len(grants)), grants, hand
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/go-redsync/redsync/v4" {
				return m.Version
			}
		}
	}
	return "?"
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: redsync-peer PORT W1|W2|W6 SECONDS")
		os.Exit(2)
	}
	secs, err := strconv.ParseFloat(os.Args[3], 64)
	w := os.Args[2]
	if err != nil || (w != "W1" && w != "W2" && w != "W6") {
		fmt.Fprintln(os.Stderr, "usage: redsync-peer PORT W1|W2|W6 SECONDS")
		os.Exit(2)
	}
	client := goredislib.NewClient(&goredislib.Options{
		Addr: "127.0.0.1:" + os.Args[1], PoolSize: 64})
	if err := client.Ping(context.Background()).Err(); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	rs := redsync.New(goredis.NewPool(client))
	d := time.Duration(secs * float64(time.Second))
	out := map[string]any{"peer": "redsync", "version": version(), "workload": w}
	var rate float64
	var total int64
	var lat, hand []int64
	switch w {
	case "W6":
		rate, total, lat, hand = handoffs(rs, d)
	case "W2":
		rate, total, lat = pairs(rs, 16, d)
	default:
		rate, total, lat = pairs(rs, 1, d)
	}
	out["pairs_per_s"] = rate
	out["pairs_total"] = total
	out["lock_p50_us"] = pct(lat, 50)
	out["lock_p99_us"] = pct(lat, 99)
	out["cdf_us"] = cdf(lat)
	if w == "W6" {
		out["handoff_p50_us"] = pct(hand, 50)
		out["handoff_cdf_us"] = cdf(hand)
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}
