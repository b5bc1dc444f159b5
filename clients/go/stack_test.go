//go:build stack

// The client against a running Lenstack (test/clients/go.test.ts starts one and runs
// `go test -tags stack` with LENSTACK_BASE_URL, LENSTACK_API_KEY and LENSTACK_PHOTOS set):
// analyze → lookup → photo batch → vehicle batch → items → export, decoding every output into
// its generated type. An output that decodes to nothing fails.
package lenstack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func stackClient(t *testing.T) (*Client, string) {
	t.Helper()
	base, key, photos := os.Getenv("LENSTACK_BASE_URL"), os.Getenv("LENSTACK_API_KEY"), os.Getenv("LENSTACK_PHOTOS")
	if base == "" || key == "" || photos == "" {
		t.Fatal("set LENSTACK_BASE_URL, LENSTACK_API_KEY and LENSTACK_PHOTOS (test/clients/go.test.ts does)")
	}
	c, err := New(base, key)
	if err != nil {
		t.Fatal(err)
	}
	return c, photos
}

func photo(t *testing.T, dir, name string) (b64, sha string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return base64.StdEncoding.EncodeToString(b), hex.EncodeToString(sum[:])
}

// notEmpty fails when v encodes to nothing: a decoder that dropped every field.
func notEmpty(t *testing.T, what string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 20 || bytes.Equal(b, []byte("{}")) {
		t.Fatalf("%s decoded to %s", what, b)
	}
}

func TestAgainstTheStack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, dir := stackClient(t)

	// Analyze one photo: the photo output, with each lens's fields.
	canon, canonSHA := photo(t, dir, "Canon_40D.jpg")
	analysis, err := c.Analyze(ctx, AnalyzeRequest{ImageBase64: &canon, Modules: &[]LensName{LensNameDating, LensNameDescribe}})
	if err != nil {
		t.Fatal(err)
	}
	if analysis.OutputSchema != AnalysisOutputSchemaPhoto {
		t.Fatalf("outputSchema %s", analysis.OutputSchema)
	}
	out, err := analysis.Output.AsPhotoOutput()
	if err != nil {
		t.Fatal(err)
	}
	if out.EstimatedDate == nil || out.Caption == nil {
		t.Fatalf("photo output without the lenses' fields: %+v", out)
	}
	notEmpty(t, "estimatedDate", out.EstimatedDate)

	// Lookup finds it, with the lenses it ran.
	lookup, err := c.Lookup(ctx, LookupRequest{ImagesBase64: &[]string{canon}})
	if err != nil {
		t.Fatal(err)
	}
	found, ok := lookup.Results[canonSHA]
	if !ok || found.MatchType != LookupResultMatchTypeExact || found.Photo == nil {
		t.Fatalf("lookup %+v", lookup.Results)
	}
	notEmpty(t, "photo record", found.Photo)

	// A photo batch: every item's output decodes.
	nikon, _ := photo(t, dir, "Nikon_D70.jpg")
	pentax, _ := photo(t, dir, "Pentax_K10D.jpg")
	names := []string{"nikon.jpg", "pentax.jpg"}
	batch, err := c.CreateBatch(ctx, BatchRequest{
		Items:   &[]BatchPhoto{{Base64: &nikon, Name: &names[0]}, {Base64: &pentax, Name: &names[1]}},
		Modules: &[]LensName{LensNameDating},
	})
	if err != nil {
		t.Fatal(err)
	}
	done, err := c.WaitBatch(ctx, batch.Id, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != BatchStatusCompleted || done.Counts.Done != 2 {
		t.Fatalf("photo batch %+v", done)
	}
	seen := 0
	for item, err := range c.BatchItems(ctx, batch.Id) {
		if err != nil {
			t.Fatal(err)
		}
		seen++
		if item.Output == nil {
			t.Fatalf("item %d has no output", item.Index)
		}
		po, err := item.Output.AsPhotoOutput()
		if err != nil || po.EstimatedDate == nil {
			t.Fatalf("item %d: %v %+v", item.Index, err, po)
		}
	}
	if seen != 2 {
		t.Fatalf("%d items", seen)
	}

	// A vehicle batch: one report, with its grades and photos.
	vin := "WDB2030461A123456"
	vehicles, err := c.CreateBatch(ctx, BatchRequest{Vehicles: &[]BatchVehicle{{Items: []BatchPhoto{{Base64: &nikon}, {Base64: &pentax}}, Vehicle: &struct {
		Make    *string `json:"make,omitempty"`
		Mileage *int    `json:"mileage,omitempty"`
		Model   *string `json:"model,omitempty"`
		Vin     *string `json:"vin,omitempty"`
		Year    *int    `json:"year,omitempty"`
	}{Vin: &vin}}}})
	if err != nil {
		t.Fatal(err)
	}
	if done, err = c.WaitBatch(ctx, vehicles.Id, time.Second); err != nil || done.Status != BatchStatusCompleted {
		t.Fatalf("vehicle batch %+v %v", done, err)
	}
	reports := 0
	for item, err := range c.BatchItems(ctx, vehicles.Id) {
		if err != nil {
			t.Fatal(err)
		}
		if item.Output == nil || item.Photos == nil || len(*item.Photos) != 2 {
			t.Fatalf("vehicle item %+v", item)
		}
		report, err := item.Output.AsVehicleReportOutput()
		if err != nil || report.ReportId == "" {
			t.Fatalf("report %v %+v", err, report)
		}
		notEmpty(t, "overallCondition", report.OverallCondition)
		notEmpty(t, "componentGrades", report.ComponentGrades)
		reports++
	}
	if reports != 1 {
		t.Fatalf("%d reports", reports)
	}

	// The export, as a file.
	csv, err := c.Export(ctx, vehicles.Id, "csv")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(csv, []byte(vin)) {
		t.Fatalf("export without the VIN: %.300s", csv)
	}
}
