// Command argocd-lua is a test judge: it runs an Argo CD resource health script over objects in
// the Lua VM Argo CD uses (github.com/yuin/gopher-lua, the version Argo CD v3 pins), set up the
// way Argo CD's util/lua sets it up for a resource.customizations.health script:
//
//   - the standard libraries are not opened (useOpenLibs is false for a customization), only
//     package, base and table (Argo CD also adds a restricted os library, which our script does
//     not use; it is left out here);
//   - the object is the global `obj`, decoded from JSON as Argo CD decodes it (maps and arrays
//     become tables, numbers become Lua numbers);
//   - the script runs under a one second deadline;
//   - the returned table's status must be one of Argo CD's health codes, else the verdict is
//     Unknown with "Lua returned an invalid health status".
//
// Usage: argocd-lua SCRIPT < objects.json, where objects.json is a JSON array of objects.
// Output: a JSON array of {"status": ..., "message": ...}, one per object, in input order; a
// script error is {"status": "Error", "message": <the error>} (Argo CD would show the resource's
// health as Unknown and log the error).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	lua "github.com/yuin/gopher-lua"
)

type verdict struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// The health codes Argo CD accepts from a script (gitops-engine pkg/health).
var healthCodes = map[string]bool{
	"Unknown": true, "Progressing": true, "Suspended": true, "Healthy": true, "Degraded": true, "Missing": true,
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: argocd-lua SCRIPT < objects.json")
		os.Exit(2)
	}
	script, err := os.ReadFile(os.Args[1])
	if err == nil {
		err = run(string(script), os.Stdin, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "argocd-lua judge:", err)
		os.Exit(2)
	}
}

func run(script string, in io.Reader, out io.Writer) error {
	var objects []map[string]any
	dec := json.NewDecoder(in)
	dec.UseNumber()
	if err := dec.Decode(&objects); err != nil {
		return fmt.Errorf("stdin is not a JSON array of objects: %w", err)
	}
	results := make([]verdict, 0, len(objects))
	for _, obj := range objects {
		v, err := health(script, obj)
		if err != nil {
			v = verdict{Status: "Error", Message: err.Error()}
		}
		results = append(results, v)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(results)
}

func health(script string, obj map[string]any) (verdict, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return verdict{}, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", decode(l, obj))
	if err := l.DoString(script); err != nil {
		return verdict{}, err
	}
	ret := l.Get(-1)
	table, ok := ret.(*lua.LTable)
	if !ok {
		return verdict{}, fmt.Errorf("expect table output from Lua script, not %s", ret.Type())
	}
	v := verdict{Status: luaString(table.RawGetString("status")), Message: luaString(table.RawGetString("message"))}
	if !healthCodes[v.Status] {
		return verdict{Status: "Unknown", Message: "Lua returned an invalid health status"}, nil
	}
	return v, nil
}

func luaString(v lua.LValue) string {
	if v == lua.LNil {
		return ""
	}
	return v.String()
}

// decode mirrors Argo CD's decodeValue: JSON values to Lua values.
func decode(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case json.Number:
		// The controller holds integers as int64 and other numbers as float64: both are numbers.
		f, err := v.Float64()
		if err != nil {
			return lua.LString(v)
		}
		return lua.LNumber(f)
	case []any:
		arr := l.CreateTable(len(v), 0)
		for _, item := range v {
			arr.Append(decode(l, item))
		}
		return arr
	case map[string]any:
		tbl := l.CreateTable(0, len(v))
		for key, item := range v {
			tbl.RawSetH(lua.LString(key), decode(l, item))
		}
		return tbl
	}
	return lua.LNil
}
