package workers

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr []string // substrings; nil means valid
	}{
		{name: "zero value", cfg: Config{}},
		{name: "all set", cfg: Config{Shards: 3, QueueDepth: 7, ReadyDepth: 1, PoolSize: 5, PoolPerShard: true, IdleTimeout: time.Second, RetryAfter: time.Millisecond}},
		{name: "per-shard pool smaller than shards", cfg: Config{Shards: 8, PoolSize: 3, PoolPerShard: true}},
		{name: "negative shards", cfg: Config{Shards: -1}, wantErr: []string{"Shards = -1"}},
		{name: "too many shards", cfg: Config{Shards: maxShards + 1}, wantErr: []string{"Shards = 65537"}},
		{name: "negative queue", cfg: Config{QueueDepth: -5}, wantErr: []string{"QueueDepth = -5", "ReadyDepth = -5"}},
		{name: "negative ready only", cfg: Config{ReadyDepth: -1}, wantErr: []string{"ReadyDepth = -1"}},
		{name: "huge pool", cfg: Config{PoolSize: maxPoolSize + 1}, wantErr: []string{"PoolSize"}},
		{name: "negative durations", cfg: Config{IdleTimeout: -1, RetryAfter: -time.Second}, wantErr: []string{"IdleTimeout", "RetryAfter"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors mentioning %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v, want it to mention %q", err, w)
				}
			}
			if _, nerr := New(tc.cfg); nerr == nil {
				t.Error("New accepted an invalid config")
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	got := Config{}.withDefaults()
	want := Config{
		Shards:      4 * runtime.GOMAXPROCS(0),
		QueueDepth:  DefaultQueueDepth,
		ReadyDepth:  DefaultQueueDepth,
		PoolSize:    DefaultPoolSize,
		IdleTimeout: DefaultIdleTimeout,
		RetryAfter:  DefaultRetryAfter,
	}
	if got.Shards != want.Shards || got.QueueDepth != want.QueueDepth || got.ReadyDepth != want.ReadyDepth ||
		got.PoolSize != want.PoolSize || got.IdleTimeout != want.IdleTimeout || got.RetryAfter != want.RetryAfter {
		t.Errorf("defaults = %+v, want %+v", got, want)
	}
	if got := (Config{QueueDepth: 9}).withDefaults().ReadyDepth; got != 9 {
		t.Errorf("ReadyDepth default = %d, want QueueDepth", got)
	}
}

func TestPoolLayout(t *testing.T) {
	tests := []struct {
		cfg         Config
		size, count int
	}{
		{Config{Shards: 4, PoolSize: 10}, 10, 1},
		{Config{Shards: 4, PoolSize: 10, PoolPerShard: true}, 3, 4},
		{Config{Shards: 8, PoolSize: 3, PoolPerShard: true}, 1, 8},
		{Config{Shards: 2, PoolSize: 8, PoolPerShard: true}, 4, 2},
	}
	for _, tc := range tests {
		size, count := tc.cfg.pools()
		if size != tc.size || count != tc.count {
			t.Errorf("%+v: pools() = %d×%d, want %d×%d", tc.cfg, count, size, tc.count, tc.size)
		}
		d := newDispatcher(t, tc.cfg)
		if st := d.Stats(); st.PoolCap != tc.size*tc.count || len(st.Shards) != tc.cfg.Shards {
			t.Errorf("%+v: Stats = %+v", tc.cfg, st)
		}
		closeDispatcher(t, d)
	}
}
