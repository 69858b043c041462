package client

import "time"

// DelayFallbacks, for the tests of package client_test, pushes SubmitAndWait's own ways of
// finding a batch (the identical-content question and the stream hedge) d after the
// submission, so a test sees what the batcher's answers alone achieve.
func DelayFallbacks(c *Client, d time.Duration) {
	c.identicalCheckAfter, c.hedgeAfter = d, d
}
