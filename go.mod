module github.com/lease-fence/lease-fence

go 1.26

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/syumai/workers v0.33.0
)
